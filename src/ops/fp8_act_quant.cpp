#include "kiln/ops/fp8_act_quant.hpp"

#include "kiln/gpu_backend.hpp"
#include "ops/fp8_act_quant_floor.hpp"

namespace kiln::ops {

Fp8ActQuant Fp8ActQuant::resolve(GpuBackend& gpu) {
  const KernelHandle shared = try_kernel(gpu, FP8_QUANT_MODULE, FP8_QUANT_ENTRY);
  // Why only after the plain entry loaded: both come from one module, and asking again after a
  // failed load would retry it.
  const KernelHandle shared_pdl =
      shared.loaded() ? try_kernel(gpu, FP8_QUANT_MODULE, FP8_QUANT_PDL_ENTRY) : KernelHandle{};
  return Fp8ActQuant(shared, try_target_kernel(gpu, FP8_QUANT_HOPPER_MODULE, FP8_QUANT_HOPPER_ENTRY),
                     gpu.device().sm_count, shared_pdl);
}

Fp8ActQuant Fp8ActQuant::shared_only(KernelHandle shared, std::uint32_t sm_count) {
  return Fp8ActQuant(shared, KernelHandle{}, sm_count);
}

Fp8QuantPick Fp8ActQuant::pick(std::uint32_t m, std::uint32_t k) const {
  const bool requested = fp8_act_quant_hopper_enabled();
  Fp8QuantPick chosen = pick_with(requested, m, k, sm_count_);
  // Why only launches: a no-op or a refusal runs no kernel, so it has no verdict to report.
  if (chosen.launches()) fp8_act_quant_note_verdict(requested, chosen.reject, m, k, sm_count_);
  return chosen;
}

Fp8QuantPick Fp8ActQuant::pick_with(bool requested, std::uint32_t m, std::uint32_t k,
                                    std::uint32_t sm_count, bool twin_aligned) const {
  Fp8QuantPick chosen = pick_with(requested, m, k, sm_count);
  if (!chosen.twin || twin_aligned) return chosen;
  if (!shared_.loaded()) return Fp8QuantPick{{}, {}, false, std::nullopt, requested, Fp8QuantAction::twin_misaligned};
  // Why the shape check again: the shared kernel has the grid-Y limit the twin does not.
  const Fp8QuantAction action = fp8_quant_action(false, m, k);
  if (action != Fp8QuantAction::launch)
    return Fp8QuantPick{{}, {}, false, Fp8HopperReject::misaligned, requested, action};
  return Fp8QuantPick{shared_, fp8_quant_grid(false, m, k), false, Fp8HopperReject::misaligned, requested, action};
}

std::string_view to_string(Fp8QuantAction action) {
  switch (action) {
    case Fp8QuantAction::launch: return "launch";
    case Fp8QuantAction::noop: return "no-op: m == 0 or k == 0, nothing to quantize";
    case Fp8QuantAction::k_not_multiple: return "k is not a multiple of 128";
    case Fp8QuantAction::m_past_grid_x: return "m is past the grid X limit (2^31-1 rows)";
    case Fp8QuantAction::k_past_grid_y: return "k/128 is past the shared kernel's grid Y limit (65535)";
    case Fp8QuantAction::twin_misaligned: return "the twin is the only kernel and x or q is not 16/8-byte aligned";
  }
  return "unknown";
}

}  // namespace kiln::ops

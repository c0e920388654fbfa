#include "kiln/ops/fp8_act_quant.hpp"

#include "kiln/gpu_backend.hpp"

namespace kiln::ops {

Fp8ActQuant Fp8ActQuant::resolve(GpuBackend& gpu) {
  return Fp8ActQuant(try_kernel(gpu, FP8_QUANT_MODULE, FP8_QUANT_ENTRY),
                     try_target_kernel(gpu, FP8_QUANT_HOPPER_MODULE, FP8_QUANT_HOPPER_ENTRY),
                     gpu.device().sm_count);
}

Fp8ActQuant Fp8ActQuant::shared_only(KernelHandle shared, std::uint32_t sm_count) {
  return Fp8ActQuant(shared, KernelHandle{}, sm_count);
}

Fp8QuantPick Fp8ActQuant::pick(std::uint32_t m, std::uint32_t k) const {
  const bool requested = fp8_act_quant_hopper_enabled();
  Fp8QuantPick chosen = pick_with(requested, m, k, sm_count_);
  fp8_act_quant_note_verdict(requested, chosen.reject, m, k);
  return chosen;
}

Fp8QuantPick Fp8ActQuant::pick_with(bool requested, std::uint32_t m, std::uint32_t k,
                                    std::uint32_t sm_count, bool twin_aligned) const {
  Fp8QuantPick chosen = pick_with(requested, m, k, sm_count);
  if (chosen.twin && !twin_aligned && shared_.loaded())
    chosen = Fp8QuantPick{shared_, fp8_quant_grid(false, m, k), false, Fp8HopperReject::misaligned, requested};
  return chosen;
}

}  // namespace kiln::ops

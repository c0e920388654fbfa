// kiln.h: the FP8 activation quantizer's pick, plan and launch.
#include <cstddef>
#include <string>

#include "c_boundary.hpp"
#include "c_service.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "ops/fp8_act_quant_floor.hpp"

using kiln::c_api::copy_text;
using kiln::c_api::guarded;
using kiln::c_api::require_pointer;
using kiln::c_api::require_struct;
using kiln::c_api::write_struct;
namespace ops = kiln::ops;

static_assert(sizeof(kiln_fp8_pick) == KILN_FP8_PICK_V2_SIZE, "kiln_fp8_pick v2 layout changed");
static_assert(offsetof(kiln_fp8_pick, noop) == KILN_FP8_PICK_V1_SIZE, "v2 fields must follow the v1 layout");
static_assert(ops::FP8_HOPPER_REJECT_COUNT == 4, "a new Fp8HopperReject needs a KILN_FP8_REJECT_ code");

namespace {

// Why: both quantizer kernels run 128-thread CTAs (BLOCK_THREADS in fp8_act_quant_launch.cpp).
constexpr std::uint32_t FP8_BLOCK_THREADS = 128;

std::int32_t reject_code(const std::optional<ops::Fp8HopperReject>& reject) {
  if (!reject) return KILN_FP8_REJECT_NONE;
  switch (*reject) {
    case ops::Fp8HopperReject::absent: return KILN_FP8_REJECT_ABSENT;
    case ops::Fp8HopperReject::not_requested: return KILN_FP8_REJECT_NOT_REQUESTED;
    case ops::Fp8HopperReject::too_few_ctas: return KILN_FP8_REJECT_TOO_FEW_CTAS;
    case ops::Fp8HopperReject::misaligned: return KILN_FP8_REJECT_MISALIGNED;
  }
  kiln::throw_error("unknown Fp8HopperReject");
}

kiln_fp8_pick to_c(const ops::Fp8QuantPick& chosen) {
  // Why: every path here refuses before converting, so only launches and no-ops arrive.
  if (chosen.refused()) kiln::throw_error("fp8_act_quant: a refused pick reached the C conversion");
  kiln_fp8_pick pick{};
  pick.noop = chosen.action == ops::Fp8QuantAction::noop ? 1 : 0;
  pick.twin = chosen.twin ? 1 : 0;
  pick.kernel = chosen.kernel.raw;
  for (std::size_t i = 0; i < 3; ++i) pick.grid[i] = chosen.grid[i];
  pick.block[0] = FP8_BLOCK_THREADS;
  pick.block[1] = 1;
  pick.block[2] = 1;
  pick.reject = reject_code(chosen.reject);
  pick.requested = chosen.requested ? 1 : 0;
  copy_text(pick.entry, !chosen.launches() ? std::string_view()
                        : chosen.twin      ? ops::FP8_QUANT_HOPPER_ENTRY
                                           : ops::FP8_QUANT_ENTRY);
  copy_text(pick.reason, chosen.reject ? ops::to_string(*chosen.reject) : std::string_view());
  return pick;
}

void require_flag(std::int32_t value, const char* name) {
  if (value != 0 && value != 1) kiln::throw_invalid_argument(name, "0 or 1", std::to_string(value));
}

}  // namespace

extern "C" kiln_status kiln_fp8_act_quant_pick(kiln_service* service, std::uint32_t m, std::uint32_t k,
                                               kiln_fp8_pick* out) {
  return guarded([&] {
    require_pointer(service, "service");
    require_struct(out, "out", KILN_FP8_PICK_V1_SIZE);
    const ops::Fp8QuantPick chosen = service->service.fp8_act_quant().pick(m, k);
    ops::fp8_quant_require_launchable(chosen, m, k);
    write_struct(out, to_c(chosen));
  });
}

extern "C" kiln_status kiln_fp8_act_quant_plan(std::uint32_t m, std::uint32_t k, std::uint32_t sm_count,
                                               std::int32_t twin_present, std::int32_t lever, kiln_fp8_pick* out) {
  return guarded([&] {
    require_struct(out, "out", KILN_FP8_PICK_V1_SIZE);
    require_flag(twin_present, "twin_present");
    if (lever != KILN_FP8_LEVER_PROCESS) require_flag(lever, "lever");
    const bool requested = lever == KILN_FP8_LEVER_PROCESS ? ops::fp8_act_quant_hopper_enabled() : lever == 1;
    // Why placeholder handles: the rule only asks which kernels exist; 1 and 2 stand for "loaded"
    // and never leave this function (the plan's kernel is 0).
    const ops::Fp8ActQuant quant(kiln::KernelHandle{1}, twin_present ? kiln::KernelHandle{2} : kiln::KernelHandle{},
                                 sm_count);
    const ops::Fp8QuantPick chosen = quant.pick_with(requested, m, k, sm_count);
    ops::fp8_quant_require_launchable(chosen, m, k);
    kiln_fp8_pick pick = to_c(chosen);
    pick.kernel = 0;
    write_struct(out, pick);
  });
}

extern "C" kiln_status kiln_fp8_act_quant(kiln_service* service, const void* x, void* q, float* scales,
                                          std::uint32_t m, std::uint32_t k, void* stream, kiln_fp8_pick* out) {
  return guarded([&] {
    require_pointer(service, "service");
    if (out != nullptr) require_struct(out, "out", KILN_FP8_PICK_V1_SIZE);
    kiln::CudaBackend& backend = service->service.backend();
    const ops::Fp8ActQuant& quant = service->service.fp8_act_quant();
    ops::Fp8QuantPick chosen;
    try {
      chosen = quant.launch(backend, x, q, scales, m, k, stream);
    } catch (const kiln::Error& error) {
      // Why: launch reports a missing kernel as a plain kiln::Error; the C caller should be able
      // to tell "no GPU here" from a bug without reading the text.
      if (!quant.available() && !kiln::c_api::is_invalid_argument(error)) {
        const std::string& why = backend.unavailable_reason();
        throw kiln::c_api::StatusError(KILN_ERROR_UNAVAILABLE,
                                       std::string(error.what()) + ": " +
                                           (why.empty() ? "the quantizer modules did not load (see the log)" : why));
      }
      throw;
    }
    if (out != nullptr) write_struct(out, to_c(chosen));
  });
}

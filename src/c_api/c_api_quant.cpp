// kiln.h: the quantizer family (kiln_quant_*).
#include <cstddef>
#include <string>

#include "c_boundary.hpp"
#include "c_service.hpp"
#include "kiln/ops/group_quant.hpp"

using kiln::c_api::guarded;
using kiln::c_api::require_pointer;
using kiln::c_api::require_struct;
namespace ops = kiln::ops;

static_assert(sizeof(kiln_quant_params) == KILN_QUANT_PARAMS_V2_SIZE &&
                  offsetof(kiln_quant_params, experts) == KILN_QUANT_PARAMS_V1_SIZE,
              "kiln_quant_params v1 and v2 layouts changed");
static_assert(sizeof(kiln_quant_pick) == KILN_QUANT_PICK_V1_SIZE, "kiln_quant_pick v1 layout changed");
static_assert(KILN_QUANT_KERNEL_COUNT == ops::QUANT_KERNEL_COUNT && KILN_QUANT_KERNEL_FAMILY_ONE_GROUP ==
                  static_cast<int>(ops::QuantKernel::family_one_group),
              "kiln.h's kernel kinds are QuantKernel's values");
static_assert(KILN_QUANT_WHY_BATCHED + 1 == ops::QUANT_PICK_REASON_COUNT &&
                  KILN_QUANT_WHY_BATCHED == static_cast<int>(ops::QuantPickReason::batched_input) &&
                  KILN_QUANT_WHY_SHARED_SMALL_GRID == static_cast<int>(ops::QuantPickReason::shared_small_grid) &&
                  KILN_QUANT_WHY_ONLY_KERNEL == static_cast<int>(ops::QuantPickReason::only_kernel) &&
                  KILN_QUANT_WHY_DEVICE_PREFERS_FAMILY == static_cast<int>(ops::QuantPickReason::device_prefers_family),
              "kiln.h's reasons are QuantPickReason's values");

namespace {

kiln_quant_params default_params() {
  kiln_quant_params params{};
  params.struct_size = sizeof(kiln_quant_params);
  params.input = KILN_QUANT_IN_BF16;
  params.group = 128;
  params.output = KILN_QUANT_OUT_E4M3;
  params.scales = KILN_QUANT_SCALES_ROW;
  params.eps = 1e-10f;
  return params;
}

void require_in(std::int32_t value, std::int32_t last, const char* name) {
  if (value < 0 || value > last)
    kiln::throw_invalid_argument(name, "0.." + std::to_string(last) + " (KILN_QUANT_* constants)", std::to_string(value));
}

void require_flag(std::int32_t value, const char* name) {
  if (value != 0 && value != 1) kiln::throw_invalid_argument(name, "0 or 1", std::to_string(value));
}

// The caller's params as the C++ variant and call options; checks every field.
std::pair<ops::QuantVariant, ops::QuantArgs> from_c(const kiln_quant_params* in) {
  require_struct(in, "params", KILN_QUANT_PARAMS_V1_SIZE);
  const kiln_quant_params params = kiln::c_api::read_struct(in, default_params());
  require_in(params.input, KILN_QUANT_IN_FP32, "params->input");
  require_in(params.output, KILN_QUANT_OUT_INT8, "params->output");
  require_in(params.scales, KILN_QUANT_SCALES_UE8M0_PACKED, "params->scales");
  require_flag(params.ue8m0, "params->ue8m0");
  require_flag(params.silu_and_mul, "params->silu_and_mul");
  // Why refused: a later version may give it a meaning, which old callers' garbage must not take.
  if (params.reserved != 0)
    kiln::throw_invalid_argument("params->reserved", "0 (reserved for later versions)", std::to_string(params.reserved));
  if ((params.flags & ~KILN_QUANT_FLAG_PDL) != 0)
    kiln::throw_invalid_argument("params->flags", "a combination of KILN_QUANT_FLAG_PDL (1)", std::to_string(params.flags));
  ops::QuantVariant variant;
  variant.input = static_cast<ops::QuantInput>(params.input);
  variant.group = params.group;
  variant.output = static_cast<ops::QuantOutput>(params.output);
  variant.scales = static_cast<ops::QuantScales>(params.scales);
  variant.ue8m0 = params.ue8m0 == 1;
  variant.silu_and_mul = params.silu_and_mul == 1;
  if (const std::string refusal = variant.refusal(); !refusal.empty()) kiln::throw_invalid_argument("params", "a variant that exists", refusal);
  ops::QuantArgs args;
  args.eps = params.eps;
  args.x_row_stride = params.x_row_stride;
  args.options.programmatic_dependent = (params.flags & KILN_QUANT_FLAG_PDL) != 0;
  args.experts = params.experts;
  args.x_expert_stride = params.x_expert_stride;
  args.masked_m = params.masked_m;
  return {variant, args};
}

[[noreturn]] void throw_unavailable(kiln_service* service, const std::string& what) {
  const std::string& why = service->service.unavailable_reason();
  throw kiln::c_api::StatusError(KILN_ERROR_UNAVAILABLE,
                                 what + ": " + (why.empty() ? "it did not compile or load (see the log)" : why));
}

}  // namespace

extern "C" kiln_status kiln_quant_params_init(kiln_quant_params* params) {
  return guarded([&] {
    require_pointer(params, "params");
    *params = default_params();
  });
}

extern "C" kiln_status kiln_quant_scales_bytes(const kiln_quant_params* params, std::uint64_t m, std::uint64_t k,
                                               std::uint64_t* bytes) {
  return guarded([&] {
    require_pointer(bytes, "bytes");
    const auto [variant, args] = from_c(params);
    *bytes = ops::quant_scales_bytes(variant, m, k, args.experts);
  });
}

extern "C" kiln_status kiln_quant_prepare(kiln_service* service, const kiln_quant_params* params) {
  return guarded([&] {
    require_pointer(service, "service");
    const auto [variant, args] = from_c(params);
    const ops::GroupQuant quant = service->service.group_quant(variant);
    if (!quant.available()) throw_unavailable(service, "variant " + variant.module_name() + " is not available");
    if (args.experts != 0) {
      if (!quant.prepare_batched(service->service.gpu()))
        throw_unavailable(service, "the batched form " + ops::GroupQuant::batched_module_name(variant) + " is not available");
      return;
    }
    if (!quant.prepare(service->service.gpu()))
      throw_unavailable(service, "variant " + variant.module_name() +
                                     ": its family module, for the calls the seed kernels cannot take (eps other than "
                                     "1e-10, strided rows, k/128 > 65535), is not available");
  });
}

extern "C" kiln_status kiln_quant_get_pick(kiln_service* service, const kiln_quant_params* params, std::uint64_t m,
                                           std::uint64_t k, kiln_quant_pick* out) {
  return guarded([&] {
    require_pointer(service, "service");
    require_struct(out, "out", KILN_QUANT_PICK_V1_SIZE);
    auto [variant, args] = from_c(params);
    // Why stand-in pointers: the pick reads only their alignment, and the caller asks for aligned ones.
    alignas(16) static unsigned char stand_in[16];
    args.x = args.q = args.scales = stand_in;
    args.m = m;
    args.k = k;
    ops::GroupQuant::check(variant, args);
    const ops::GroupQuant quant = service->service.group_quant(variant);
    const ops::QuantPick chosen = quant.pick(service->service.gpu(), args);
    kiln_quant_pick pick{};
    pick.struct_size = out->struct_size;
    pick.noop = chosen.noop ? 1 : 0;
    pick.kernel_kind = chosen.noop ? -1 : static_cast<std::int32_t>(chosen.kernel);
    if (!chosen.noop) {
      pick.kernel = quant.handle_of(chosen).raw;
      for (std::size_t i = 0; i < 3; ++i) pick.grid[i] = chosen.grid[i];
      pick.block[0] = chosen.block;
      pick.block[1] = pick.block[2] = 1;
      for (std::size_t i = 0; i < ops::QUANT_KERNEL_COUNT; ++i) pick.why[i] = static_cast<std::int32_t>(chosen.why[i]);
      kiln::c_api::copy_text(pick.entry, chosen.entry);
      kiln::c_api::copy_text(pick.reason, ops::to_string(chosen.reason()));
    }
    kiln::c_api::write_struct(out, pick);
  });
}

extern "C" kiln_status kiln_quant(kiln_service* service, const kiln_quant_params* params, const void* x, void* q,
                                  void* scales, std::uint64_t m, std::uint64_t k, void* stream) {
  return guarded([&] {
    require_pointer(service, "service");
    auto [variant, args] = from_c(params);
    args.x = x;
    args.q = q;
    args.scales = scales;
    args.m = m;
    args.k = k;
    args.stream = stream;
    ops::GroupQuant::check(variant, args);
    const ops::GroupQuant quant = service->service.group_quant(variant);
    if (!quant.available() && m != 0 && k != 0)
      throw_unavailable(service, "variant " + variant.module_name() + " is not available");
    try {
      quant.launch(service->service.backend(), args);
    } catch (const kiln::Error& error) {
      // Why caught although the kind alone gives KILN_ERROR_UNAVAILABLE: the message then says
      // why the device lacks the kernel (the seed variant's family module, for a call the seed
      // kernels cannot take).
      if (error.kind() != kiln::ErrorKind::unavailable) throw;
      throw_unavailable(service, error.what());
    }
  });
}

#include "kiln/ops/group_quant_pick.hpp"

#include "base/config.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"

namespace kiln::ops {

static_assert(QUANT_ONE_GROUP_MAX_CTAS_PER_SM == 64 && QUANT_SHARED_MAX_CTAS_PER_SM == 12,
              "the reasons below name the ceilings");

std::string_view to_string(QuantKernel kernel) {
  switch (kernel) {
    case QuantKernel::twin: return "twin";
    case QuantKernel::shared: return "shared";
    case QuantKernel::family_two_groups: return "family (two groups per slot)";
    case QuantKernel::family_one_group: return "family (one group per slot)";
  }
  return "unknown";
}

std::string_view to_string(QuantPickReason reason) {
  switch (reason) {
    case QuantPickReason::chosen_by_caller: return "chosen by the caller";
    case QuantPickReason::seed_variant_only: return "only the seed variant (bf16, group 128, e4m3, row-major) has it";
    case QuantPickReason::not_shipped: return "the variant ships one group per slot";
    case QuantPickReason::outside_seed_kernels:
      return "the call is outside the seed kernels (eps other than 1e-10, strided rows, or k/128 > 65535)";
    case QuantPickReason::absent: return "not in this device's image (the twin: hopper family only)";
    case QuantPickReason::twin_not_requested: return "the twin is not requested (KILN_FP8_ACT_QUANT_HOPPER=0)";
    case QuantPickReason::twin_too_few_ctas: return "the twin's grid is below the CTA floor";
    case QuantPickReason::twin_misaligned: return "x or q is not 16-byte aligned for the twin";
    case QuantPickReason::twin_fills_device: return "the twin's grid reaches the CTA floor: the twin runs";
    case QuantPickReason::device_prefers_family:
      return "this device starts CTAs too slowly for its memory: the family kernel is the faster";
    case QuantPickReason::device_prefers_shared:
      return "this device starts CTAs fast enough for its memory: the shared kernel runs";
    case QuantPickReason::one_group_small_grid: return "one group per slot: its grid is within 64 CTAs per SM";
    case QuantPickReason::one_group_large_grid: return "two groups per slot: one group would take more than 64 CTAs per SM";
    case QuantPickReason::one_group_lever_off: return "two groups per slot: KILN_Q_ONE_GROUP=0";
    case QuantPickReason::sm_count_unknown: return "two groups per slot: the device's SM count is unknown";
    case QuantPickReason::only_kernel: return "the variant's only kernel for this call";
    case QuantPickReason::shared_small_grid:
      return "the shared kernel's grid is within 12 CTAs per SM, where its CTAs start in about one wave: the shared kernel "
             "runs";
    case QuantPickReason::batched_input: return "a batch of experts: the family's batched kernel runs";
  }
  return "unknown";
}

bool quant_one_group_lever() {
  static const bool enabled = process_config().q_one_group;
  return enabled;
}

namespace {

constexpr std::size_t index(QuantKernel kernel) { return static_cast<std::size_t>(kernel); }

// The one place that tells the seed variant from the others.
bool is_seed(const QuantVariant& variant) { return variant == QuantVariant{}; }

QuantPickReason twin_reason(std::optional<Fp8HopperReject> reject) {
  if (!reject) return QuantPickReason::twin_fills_device;
  switch (*reject) {
    case Fp8HopperReject::absent: return QuantPickReason::absent;
    case Fp8HopperReject::not_requested: return QuantPickReason::twin_not_requested;
    case Fp8HopperReject::too_few_ctas: return QuantPickReason::twin_too_few_ctas;
    case Fp8HopperReject::misaligned: return QuantPickReason::twin_misaligned;
  }
  return QuantPickReason::absent;
}

// The family kernel's half of the pick: one or two groups per slot, and the grid of that one.
void pick_family(const QuantVariant& variant, const QuantPickInputs& in, QuantPick& chosen) {
  const std::uint32_t shipped = GroupQuant::items_per_slot(variant);
  QuantPickReason reason = QuantPickReason::only_kernel;
  bool one_group = true;
  if (shipped == 2) {
    if (!in.one_group_lever)
      reason = QuantPickReason::one_group_lever_off;
    else if (in.sm_count == 0)
      reason = QuantPickReason::sm_count_unknown;
    else if (GroupQuant::grid(variant, in.m, in.k, 1)[0] > std::uint64_t{QUANT_ONE_GROUP_MAX_CTAS_PER_SM} * in.sm_count)
      reason = QuantPickReason::one_group_large_grid;
    else
      reason = QuantPickReason::one_group_small_grid;
    one_group = reason == QuantPickReason::one_group_small_grid;
  }
  chosen.kernel = one_group ? QuantKernel::family_one_group : QuantKernel::family_two_groups;
  chosen.why[index(QuantKernel::family_one_group)] = reason;
  chosen.why[index(QuantKernel::family_two_groups)] = shipped == 2 ? reason : QuantPickReason::not_shipped;
  chosen.grid = GroupQuant::grid(variant, in.m, in.k, one_group ? 1 : shipped);
  chosen.block = 256;
  chosen.entry = one_group && shipped == 2 ? QUANT_ONE_GROUP_ENTRY : QUANT_ENTRY;
}

// A batch: the family's batched kernel with the groups per slot the variant ships; no other
// candidate takes a batch.
void pick_batched(const QuantVariant& variant, const QuantPickInputs& in, QuantPick& chosen) {
  const std::uint32_t shipped = GroupQuant::items_per_slot(variant);
  chosen.why.fill(QuantPickReason::batched_input);
  if (shipped == 1) chosen.why[index(QuantKernel::family_two_groups)] = QuantPickReason::not_shipped;
  chosen.kernel = shipped == 2 ? QuantKernel::family_two_groups : QuantKernel::family_one_group;
  chosen.grid = GroupQuant::batched_grid(variant, in.experts, in.m, in.k, in.masked, in.sm_count);
  chosen.block = 256;
  chosen.entry = QUANT_BATCHED_ENTRY;
}

}  // namespace

bool quant_shared_grid_is_small(std::uint64_t m, std::uint64_t k, std::uint32_t sm_count) {
  const auto grid = fp8_quant_grid(false, static_cast<std::uint32_t>(m), static_cast<std::uint32_t>(k));
  return std::uint64_t{grid[0]} * grid[1] <= std::uint64_t{QUANT_SHARED_MAX_CTAS_PER_SM} * (sm_count > 0 ? sm_count : 1);
}

std::array<bool, QUANT_KERNEL_COUNT> quant_kernels_of(const QuantVariant& variant) {
  const bool seed = is_seed(variant);
  return {seed, seed, GroupQuant::items_per_slot(variant) == 2, true};
}

QuantPick GroupQuant::pick_with(const QuantVariant& variant, const QuantPickInputs& in) {
  QuantPick chosen;
  if (in.m == 0 || in.k == 0) {
    chosen.noop = true;
    return chosen;
  }
  if (in.experts != 0) {
    pick_batched(variant, in, chosen);
    return chosen;
  }
  chosen.why[index(QuantKernel::twin)] = chosen.why[index(QuantKernel::shared)] = QuantPickReason::seed_variant_only;
  if (!is_seed(variant)) {
    pick_family(variant, in, chosen);
    return chosen;
  }
  if (!in.seed_call) {
    chosen.why[index(QuantKernel::twin)] = chosen.why[index(QuantKernel::shared)] = QuantPickReason::outside_seed_kernels;
    pick_family(variant, in, chosen);
    return chosen;
  }
  // The seed core decides the twin. Why a stand-in shared kernel: its reject order lets the twin
  // run whatever the lever and floor say when nothing else exists, and here the family kernel
  // always does.
  const Fp8ActQuant seed(KernelHandle{1}, in.twin_present ? KernelHandle{2} : KernelHandle{}, in.sm_count);
  const auto m = static_cast<std::uint32_t>(in.m);
  const auto k = static_cast<std::uint32_t>(in.k);
  const Fp8QuantPick twin = seed.pick_with(in.twin_lever, m, k, in.sm_count, in.twin_aligned);
  chosen.twin_asked = true;
  chosen.twin_requested = in.twin_lever;
  chosen.twin_reject = twin.reject;
  chosen.why[index(QuantKernel::twin)] = twin_reason(twin.reject);
  if (twin.twin) {
    chosen.kernel = QuantKernel::twin;
    chosen.grid = twin.grid;
    chosen.block = 128;
    chosen.entry = FP8_QUANT_HOPPER_ENTRY;
    for (QuantKernel other : {QuantKernel::shared, QuantKernel::family_two_groups, QuantKernel::family_one_group})
      chosen.why[index(other)] = QuantPickReason::twin_fills_device;
    return chosen;
  }
  const bool small_grid = quant_shared_grid_is_small(m, k, in.sm_count);
  if ((small_grid || in.prefers_shared) && in.shared_present) {
    const QuantPickReason reason = small_grid ? QuantPickReason::shared_small_grid : QuantPickReason::device_prefers_shared;
    chosen.kernel = QuantKernel::shared;
    chosen.grid = fp8_quant_grid(false, m, k);
    chosen.block = 128;
    chosen.entry = FP8_QUANT_ENTRY;
    chosen.why[index(QuantKernel::shared)] = reason;
    chosen.why[index(QuantKernel::family_two_groups)] = QuantPickReason::not_shipped;
    chosen.why[index(QuantKernel::family_one_group)] = reason;
    return chosen;
  }
  pick_family(variant, in, chosen);
  chosen.why[index(QuantKernel::shared)] =
      in.shared_present ? QuantPickReason::device_prefers_family : QuantPickReason::absent;
  chosen.why[index(chosen.kernel)] =
      in.shared_present ? QuantPickReason::device_prefers_family : QuantPickReason::only_kernel;
  return chosen;
}

}  // namespace kiln::ops

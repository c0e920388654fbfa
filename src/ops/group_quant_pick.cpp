#include "kiln/ops/group_quant_pick.hpp"

#include "base/env.hpp"
#include "kiln/ops/group_quant.hpp"

namespace kiln::ops {

static_assert(QUANT_ONE_GROUP_MAX_CTAS_PER_SM == 64, "the reasons below name the ceiling");

std::string_view to_string(QuantSlotReason reason) {
  switch (reason) {
    case QuantSlotReason::one_kernel: return "the variant ships one group per slot";
    case QuantSlotReason::chosen: return "chosen by the caller";
    case QuantSlotReason::lever_off: return "two groups per slot: KILN_Q_ONE_GROUP=0";
    case QuantSlotReason::sm_count_unknown: return "two groups per slot: the device's SM count is unknown";
    case QuantSlotReason::large_grid: return "two groups per slot: one group would take more than 64 CTAs per SM";
    case QuantSlotReason::small_grid: return "one group per slot: its grid is within 64 CTAs per SM";
  }
  return "unknown";
}

bool quant_one_group_lever() {
  static const bool enabled = switch_lever("KILN_Q_ONE_GROUP", true);
  return enabled;
}

QuantSlotPick GroupQuant::pick_with(const QuantVariant& variant, bool requested, std::uint64_t m, std::uint64_t k,
                                    std::uint32_t sm_count) {
  const std::uint32_t shipped = items_per_slot(variant);
  const auto shipped_pick = [&](QuantSlotReason reason) {
    return QuantSlotPick{false, shipped, grid(variant, m, k, shipped), reason};
  };
  if (shipped == 1) return shipped_pick(QuantSlotReason::one_kernel);
  if (!requested) return shipped_pick(QuantSlotReason::lever_off);
  if (sm_count == 0) return shipped_pick(QuantSlotReason::sm_count_unknown);
  const std::array<std::uint32_t, 3> one_group_grid = grid(variant, m, k, 1);
  if (one_group_grid[0] > std::uint64_t{QUANT_ONE_GROUP_MAX_CTAS_PER_SM} * sm_count)
    return shipped_pick(QuantSlotReason::large_grid);
  return QuantSlotPick{true, 1, one_group_grid, QuantSlotReason::small_grid};
}

QuantSlotPick GroupQuant::chosen(const QuantVariant& variant, bool one_group, std::uint64_t m, std::uint64_t k) {
  const std::uint32_t shipped = items_per_slot(variant);
  if (shipped == 1) return QuantSlotPick{false, 1, grid(variant, m, k, 1), QuantSlotReason::one_kernel};
  const std::uint32_t items = one_group ? 1 : shipped;
  return QuantSlotPick{one_group, items, grid(variant, m, k, items), QuantSlotReason::chosen};
}

}  // namespace kiln::ops

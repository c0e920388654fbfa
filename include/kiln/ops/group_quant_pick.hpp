#pragma once
/// @file
/// Which kernel of a quantizer-family variant runs a call, on which grid, and why not the other.
///
/// The variants that ship two groups per slot (GroupQuant::items_per_slot) also export
/// `per_token_group_quant_one_group`, the same kernel with one group per slot on twice the CTAs.
/// The pick takes it while its grid is small, where two groups a thread quantizes one after the
/// other is the kernel's time, and keeps two where bandwidth (or, on the H200, instruction issue)
/// decides. As the seed's twin pick: kernel and grid come from one flag, `one_group`.

#include <array>
#include <cstdint>
#include <string_view>

namespace kiln::ops {

/// Entry point of the kernel every family variant ships (the family's name, too).
inline constexpr std::string_view QUANT_ENTRY = "per_token_group_quant";
/// Entry point of the one-group-per-slot kernel, in the modules of variants that ship two.
inline constexpr std::string_view QUANT_ONE_GROUP_ENTRY = "per_token_group_quant_one_group";

/// The one-group kernel runs while its grid is at most this many CTAs per SM. Measured on an H100
/// (132 SMs; docs/performance.md, "The one-group pick"): one group was 8-24% faster at 16-128
/// rows, 3-4% at 2048 x 7168 (27 one-group CTAs per SM for 16-bit input), 0-2.4% at 4096 x 7168 (54)
/// and level (0.99-1.015) from 8192 x 7168 (108) on; on the H200 two groups won by 5-20 points at
/// 32768 x 7168 (434). 64 takes every shape where one group gained and none where it was level.
inline constexpr std::uint32_t QUANT_ONE_GROUP_MAX_CTAS_PER_SM = 64;

/// Why a call runs the kernel it runs. In the order the pick tests them.
enum class QuantSlotReason : std::uint8_t {
  one_kernel,       ///< the variant ships one group per slot: its only kernel runs
  chosen,           ///< the caller chose the kernel (GroupQuant::launch_with)
  lever_off,        ///< two groups per slot: KILN_Q_ONE_GROUP=0
  sm_count_unknown, ///< two groups per slot: the device's SM count is unknown (0)
  large_grid,       ///< two groups per slot: one group would take more than the ceiling's CTAs per SM
  small_grid,       ///< one group per slot: its grid is within the ceiling's CTAs per SM
};

/// The reason in words (for logs, `kiln-bench` and errors).
std::string_view to_string(QuantSlotReason reason);

/// One launch decision of a family variant: `grid` is the grid of the kernel `one_group` names.
struct QuantSlotPick {
  bool one_group = false;              ///< per_token_group_quant_one_group runs (else per_token_group_quant)
  std::uint32_t items = 1;             ///< groups per slot of the kernel that runs
  std::array<std::uint32_t, 3> grid{}; ///< its grid (GroupQuant::grid with `items`)
  QuantSlotReason reason = QuantSlotReason::one_kernel;
};

/// `KILN_Q_ONE_GROUP` (a switch, default on): 0 keeps every variant on the kernel it ships, for
/// A/B runs against the pick. Read once per process; a bad value logs one warning.
bool quant_one_group_lever();

}  // namespace kiln::ops

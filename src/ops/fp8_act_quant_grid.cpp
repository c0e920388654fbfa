#include <algorithm>

#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::ops {

namespace {
constexpr std::uint32_t div_ceil(std::uint32_t a, std::uint32_t b) { return a / b + (a % b != 0); }
constexpr std::uint32_t HOPPER_LANES = 16;
constexpr std::uint32_t HOPPER_ELEMS = 8;
}  // namespace

std::array<std::uint32_t, 3> fp8_quant_grid(bool hopper, std::uint32_t m, std::uint32_t k) {
  const std::uint32_t groups = k / FP8_QUANT_GROUP;
  if (hopper) {
    const std::uint32_t y = std::max<std::uint32_t>(div_ceil(groups, FP8_QUANT_HOPPER_GROUPS_PER_CTA), 1);
    return {m, std::min(y, FP8_QUANT_MAX_GRID_Y), 1};
  }
  return {m, groups, 1};
}

std::pair<std::uint32_t, std::uint32_t> fp8_quant_hopper_span(std::uint32_t groups, std::uint32_t grid_y,
                                                              std::uint32_t block_y) {
  const std::uint32_t gpc = div_ceil(groups, grid_y);
  // Why 64-bit: block_y * gpc can pass 2^32 for block indices past the grid; the kernel's own
  // arithmetic never sees those, but the host model must not wrap into a valid range.
  const std::uint64_t g0 = static_cast<std::uint64_t>(block_y) * gpc;
  if (g0 >= groups) return {groups, groups};
  return {static_cast<std::uint32_t>(g0), static_cast<std::uint32_t>(std::min<std::uint64_t>(g0 + gpc, groups))};
}

std::optional<Fp8HopperLane> fp8_quant_hopper_lane(std::uint32_t tid, std::uint32_t span) {
  const std::uint32_t sub = tid / HOPPER_LANES;
  const std::uint32_t lane = tid % HOPPER_LANES;
  if (sub >= span) return std::nullopt;
  return Fp8HopperLane{sub, lane * HOPPER_ELEMS, lane * HOPPER_ELEMS + HOPPER_ELEMS};
}

}  // namespace kiln::ops

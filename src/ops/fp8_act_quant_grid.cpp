#include <algorithm>

#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::ops {

namespace {
constexpr std::uint32_t div_ceil(std::uint32_t a, std::uint32_t b) { return a / b + (a % b != 0); }
}  // namespace

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
  const std::uint32_t sub = tid / FP8_QUANT_HOPPER_LANES;
  const std::uint32_t lane = tid % FP8_QUANT_HOPPER_LANES;
  if (sub >= span) return std::nullopt;
  Fp8HopperLane out{sub, {}};
  for (std::uint32_t w = 0; w < out.starts.size(); ++w)
    out.starts[w] = (w * FP8_QUANT_HOPPER_LANES + lane) * FP8_QUANT_HOPPER_RUN;
  return out;
}

}  // namespace kiln::ops

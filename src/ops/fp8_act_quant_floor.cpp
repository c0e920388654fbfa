#include "kiln/ops/fp8_act_quant_floor.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>

#include "base/env.hpp"
#include "base/log.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::ops {

std::string_view to_string(Fp8HopperReject reason) {
  switch (reason) {
    case Fp8HopperReject::absent: return "kernel absent from this image (hopper family only)";
    case Fp8HopperReject::not_requested: return "not requested";
    case Fp8HopperReject::too_few_ctas: return "too few CTAs to fill the device at 16 K-groups per CTA";
    case Fp8HopperReject::misaligned: return "pointers not 16-byte aligned for the twin's uint4 loads";
  }
  return "unknown";
}

std::uint64_t fp8_quant_hopper_ctas(std::uint32_t m, std::uint32_t k) {
  const auto grid = fp8_quant_grid(true, m, k);
  return std::uint64_t{grid[0]} * grid[1] * grid[2];
}

std::uint32_t fp8_quant_hopper_min_m(std::uint32_t k, std::uint32_t sm_count) {
  const std::uint64_t floor = fp8_quant_min_ctas(sm_count);
  // Why a scan and not floor / CTAs-per-row: Y shrinks as M grows past the CTA target, so the
  // count is M * Y only while rows are split. No M reaches the floor with fewer rows than
  // floor / (CTAs of one row); from the target on, Y is 1 and the count is M itself.
  const std::uint64_t per_row = fp8_quant_hopper_ctas(1, k);
  std::uint64_t m = floor / per_row + (floor % per_row != 0);
  while (m < FP8_QUANT_HOPPER_TARGET_CTAS && fp8_quant_hopper_ctas(static_cast<std::uint32_t>(m), k) < floor) ++m;
  if (m >= FP8_QUANT_HOPPER_TARGET_CTAS) m = std::max(m, floor);
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(m, std::numeric_limits<std::uint32_t>::max()));
}

std::optional<Fp8HopperReject> fp8_act_quant_hopper_reject(bool requested, bool twin_present,
                                                           bool shared_present, std::uint32_t m,
                                                           std::uint32_t k, std::uint32_t sm_count) {
  return fp8_act_quant_hopper_reject_ctas(requested, twin_present, shared_present, fp8_quant_hopper_ctas(m, k),
                                          sm_count);
}

bool fp8_act_quant_hopper_enabled() {
  static const bool enabled = switch_lever("KILN_FP8_ACT_QUANT_HOPPER", true);
  return enabled;
}

std::optional<std::size_t> fp8_act_quant_verdict_slot(bool requested, std::optional<Fp8HopperReject> reject) {
  if (!requested) return std::nullopt;
  if (!reject) return FP8_VERDICT_SLOT_TWIN;
  return 1 + static_cast<std::size_t>(*reject);
}

void fp8_act_quant_note_verdict(bool requested, std::optional<Fp8HopperReject> reject, std::uint32_t m,
                                std::uint32_t k) {
  static std::array<std::atomic<bool>, FP8_VERDICT_SLOT_COUNT> printed{};
  const auto slot = fp8_act_quant_verdict_slot(requested, reject);
  if (!slot || printed[*slot].exchange(true, std::memory_order_relaxed)) return;
  if (!reject)
    logger().info("fp8_act_quant: Hopper twin runs (first at m={}, k={})", m, k);
  else
    logger().info("fp8_act_quant: Hopper twin requested but not run: {} (first at m={}, k={})",
                  to_string(*reject), m, k);
}

}  // namespace kiln::ops

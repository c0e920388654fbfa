#include "ops/fp8_act_quant_floor.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>

#include "base/config.hpp"
#include "base/log.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::ops {

std::string_view to_string(Fp8HopperReject reason) {
  switch (reason) {
    case Fp8HopperReject::absent: return "kernel absent from this image (hopper family only)";
    case Fp8HopperReject::not_requested: return "not requested";
    case Fp8HopperReject::too_few_ctas: return "too few CTAs to fill the device";
    case Fp8HopperReject::misaligned: return "pointers not 16-byte aligned for the twin's uint4 loads and stores";
  }
  return "unknown";
}

std::uint64_t fp8_quant_hopper_ctas(std::uint32_t m, std::uint32_t k) {
  const auto grid = fp8_quant_grid(true, m, k);
  return std::uint64_t{grid[0]} * grid[1] * grid[2];
}

std::uint32_t fp8_quant_hopper_min_m(std::uint32_t k, std::uint32_t sm_count) {
  const std::uint64_t floor = fp8_quant_min_ctas(sm_count);
  constexpr std::uint32_t NEVER = std::numeric_limits<std::uint32_t>::max();
  if (fp8_quant_hopper_ctas(NEVER, k) < floor) return NEVER;
  // The count ceil(M * L / 16), capped, never falls as M grows: the first M that reaches the
  // floor is the answer, found by bisection over [0, 2^32 - 1].
  std::uint32_t low = 0, high = NEVER;  // count(low) may miss, count(high) reaches
  while (low < high) {
    const std::uint32_t mid = low + (high - low) / 2;
    if (fp8_quant_hopper_ctas(mid, k) >= floor)
      high = mid;
    else
      low = mid + 1;
  }
  return low;
}

std::string fp8_quant_hopper_grid_text(std::uint32_t m, std::uint32_t k, std::uint32_t sm_count) {
  const auto grid = fp8_quant_grid(true, m, k);
  const std::uint64_t groups = std::uint64_t{m} * (k / FP8_QUANT_GROUP);
  return "twin grid (" + std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " + std::to_string(grid[2]) +
         ") = " + std::to_string(std::uint64_t{grid[0]} * grid[1] * grid[2]) + " CTAs for " + std::to_string(groups) +
         " K-groups (" + std::to_string(FP8_QUANT_HOPPER_GROUPS_PER_CTA) + " per CTA), floor " +
         std::to_string(fp8_quant_min_ctas(sm_count)) + " = ceil(" + fmt::format("{}", FP8_QUANT_MIN_CTAS_PER_SM) +
         " x " + std::to_string(std::max(sm_count, 1u)) + " SMs)";
}

std::string fp8_quant_reject_text(Fp8HopperReject reason, std::uint32_t m, std::uint32_t k, std::uint32_t sm_count) {
  std::string text(to_string(reason));
  if (reason == Fp8HopperReject::too_few_ctas) text += " (" + fp8_quant_hopper_grid_text(m, k, sm_count) + ")";
  return text;
}

std::optional<Fp8HopperReject> fp8_act_quant_hopper_reject(bool requested, bool twin_present,
                                                           bool shared_present, std::uint32_t m,
                                                           std::uint32_t k, std::uint32_t sm_count) {
  return fp8_act_quant_hopper_reject_ctas(requested, twin_present, shared_present, fp8_quant_hopper_ctas(m, k),
                                          sm_count);
}

bool fp8_act_quant_hopper_enabled() {
  static const bool enabled = process_config().fp8_act_quant_hopper;
  return enabled;
}

std::optional<std::size_t> fp8_act_quant_verdict_slot(bool requested, std::optional<Fp8HopperReject> reject) {
  if (!requested) return std::nullopt;
  if (!reject) return FP8_VERDICT_SLOT_TWIN;
  return 1 + static_cast<std::size_t>(*reject);
}

void fp8_act_quant_note_verdict(bool requested, std::optional<Fp8HopperReject> reject, std::uint32_t m,
                                std::uint32_t k, std::uint32_t sm_count) {
  static std::array<std::atomic<bool>, FP8_VERDICT_SLOT_COUNT> printed{};
  const auto slot = fp8_act_quant_verdict_slot(requested, reject);
  // Why a load before the exchange: after the first launch every call finds the flag set, and a
  // plain load keeps the per-launch path free of a read-modify-write on a shared line.
  if (!slot || printed[*slot].load(std::memory_order_relaxed) || printed[*slot].exchange(true, std::memory_order_relaxed))
    return;
  if (!reject)
    logger().info("fp8_act_quant: Hopper twin runs (first at m={}, k={})", m, k);
  else
    logger().info("fp8_act_quant: Hopper twin requested but not run: {} (first at m={}, k={})",
                  fp8_quant_reject_text(*reject, m, k, sm_count), m, k);
}

}  // namespace kiln::ops

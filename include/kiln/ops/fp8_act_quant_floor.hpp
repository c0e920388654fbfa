#pragma once
/// @file
/// When the Hopper twin of the FP8 activation quantizer runs: the lever, the CTA floor and the
/// once-per-process log lines. Pure functions of plain integers except the lever read and `note`.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::ops {

/// The twin must fill the device: at least this many of its CTAs per SM, else the shared kernel
/// (one CTA per group, 16x the CTAs) runs. The floor counts CTAs, not tokens, because the same M
/// is a different amount of work at a different K.
/// Measured for the flat grid at the floor's 24 points on the H200 in three runs: from 40 twin CTAs
/// (the smallest point) the twin was never slower, and between 43 and 63 it was 3-4% faster in one
/// run and tied in another, so no floor above 40 routes all three runs' points right; below 40 the
/// arms tie, and the shared kernel keeps the launch. 40 CTAs on 132 SMs (docs/performance.md,
/// "The CTA floor").
inline constexpr double FP8_QUANT_MIN_CTAS_PER_SM = 0.3;

/// Why the twin does not run. Each has a stable text (`to_string`).
enum class Fp8HopperReject {
  absent,         ///< "kernel absent from this image (hopper family only)"
  not_requested,  ///< "not requested"
  too_few_ctas,   ///< "too few CTAs to fill the device"
  misaligned,     ///< "pointers not 16-byte aligned for the twin's uint4 loads and stores"
};
inline constexpr std::size_t FP8_HOPPER_REJECT_COUNT = 4;

/// The stable text of `reason`, true for every shape it is given for (kiln.h's `reason`).
std::string_view to_string(Fp8HopperReject reason);

/// `ceil(FP8_QUANT_MIN_CTAS_PER_SM * max(sm_count, 1))` (exact: a double holds every product).
inline std::uint64_t fp8_quant_min_ctas(std::uint32_t sm_count) {
  const double floor = FP8_QUANT_MIN_CTAS_PER_SM * (sm_count > 0 ? sm_count : 1);
  const auto whole = static_cast<std::uint64_t>(floor);
  return whole + (static_cast<double>(whole) < floor);
}
/// CTAs of the twin's grid for `(m, k)`: the product of `fp8_quant_grid(true, m, k)`. 64-bit, so
/// it cannot overflow for any 32-bit `m` and `k`.
std::uint64_t fp8_quant_hopper_ctas(std::uint32_t m, std::uint32_t k);
/// The smallest M whose twin grid reaches the floor at this K; the CTA count never falls as M grows,
/// so with the lever on and both kernels present every M >= it takes the twin and M - 1 does not
/// (132 SMs: 16 at K=5120, 14 at K=6144, 12 at K=7168, 5 at K=17408). 2^32 - 1 when no M reaches
/// the floor (K < 128); the result may pass 2^31-1 (no launchable M reaches a floor that high).
std::uint32_t fp8_quant_hopper_min_m(std::uint32_t k, std::uint32_t sm_count);

/// The twin's grid for `(m, k)` against the floor, every number taken from that grid:
/// "twin grid (38, 1, 1) = 38 CTAs for 600 K-groups (16 per CTA), floor 40 = ceil(0.3 x 132 SMs)".
std::string fp8_quant_hopper_grid_text(std::uint32_t m, std::uint32_t k, std::uint32_t sm_count);
/// `reason` as kiln logs and prints it: `to_string(reason)`, and for too_few_ctas the numbers
/// behind it in parentheses (`fp8_quant_hopper_grid_text`).
std::string fp8_quant_reject_text(Fp8HopperReject reason, std::uint32_t m, std::uint32_t k, std::uint32_t sm_count);

/// Why the twin does not run for this launch, or nothing when it runs. In this order:
/// 1. twin absent -> absent;
/// 2. no shared kernel -> nothing: the twin runs whatever the lever and floor say, since a refusal
///    would hand the launch to a kernel that does not exist;
/// 3. lever off -> not_requested;
/// 4. twin grid below `fp8_quant_min_ctas(sm_count)` -> too_few_ctas;
/// 5. otherwise nothing.
std::optional<Fp8HopperReject> fp8_act_quant_hopper_reject(bool requested, bool twin_present,
                                                           bool shared_present, std::uint32_t m,
                                                           std::uint32_t k, std::uint32_t sm_count);
/// The same verdict from the twin grid's CTA count, for callers that already hold the grid
/// (`pick_with` computes it once and inlines this, which is what keeps a pick near 10 ns).
inline std::optional<Fp8HopperReject> fp8_act_quant_hopper_reject_ctas(bool requested, bool twin_present,
                                                                       bool shared_present, std::uint64_t twin_ctas,
                                                                       std::uint32_t sm_count) {
  if (!twin_present) return Fp8HopperReject::absent;
  if (!shared_present) return std::nullopt;
  if (!requested) return Fp8HopperReject::not_requested;
  if (twin_ctas < fp8_quant_min_ctas(sm_count)) return Fp8HopperReject::too_few_ctas;
  return std::nullopt;
}

/// `KILN_FP8_ACT_QUANT_HOPPER` (`1`/`0` and the other switch words; default on), read once per
/// process. A bad value is one warning and the default.
bool fp8_act_quant_hopper_enabled();

/// Log slots: one per verdict line, so each distinct verdict is printed once per process even when
/// M changes between launches (one shared once-flag would hide the second verdict).
inline constexpr std::size_t FP8_VERDICT_SLOT_TWIN = 0;
inline constexpr std::size_t FP8_VERDICT_SLOT_COUNT = 1 + FP8_HOPPER_REJECT_COUNT;

/// Which slot a verdict logs under: the twin running -> FP8_VERDICT_SLOT_TWIN; a refusal while the
/// lever asked for the twin -> 1 + reason; nothing when the lever is off.
std::optional<std::size_t> fp8_act_quant_verdict_slot(bool requested, std::optional<Fp8HopperReject> reject);

/// Log the verdict of a launch once per process per slot (info level), with
/// `fp8_quant_reject_text` for a refusal. Thread-safe.
void fp8_act_quant_note_verdict(bool requested, std::optional<Fp8HopperReject> reject,
                                std::uint32_t m, std::uint32_t k, std::uint32_t sm_count);

}  // namespace kiln::ops

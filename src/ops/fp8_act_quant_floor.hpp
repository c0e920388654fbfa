#pragma once
/// @file
/// When the Hopper twin of the FP8 activation quantizer runs: the lever, the floor's numbers in
/// words and the once-per-process log lines. Pure functions of plain integers except the lever read
/// and `note`. The rule the inline pick evaluates (the floor, Fp8HopperReject) is public, in
/// kiln/ops/fp8_act_quant.hpp.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::ops {

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

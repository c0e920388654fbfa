#pragma once
/// @file
/// The per-token-group FP8 activation quantizers a layer can launch, and the grid each one needs
/// (port of kiln's original pick/grid design: reject order, reasons and one-flag pick kept).
///
/// Invariant: `Fp8ActQuant::pick_with` takes the kernel handle and the grid from the same `twin`
/// flag, so a pick never pairs one kernel with the other's grid.
///
/// The shared kernel (`kernels_src/common/per_token_group_quant_fp8.cu`) runs one 128-thread CTA
/// per 128-element K-group. The Hopper twin (`kernels_src/hopper/fp8_act_quant_hopper.cu`) gives
/// each group 8 threads that own 16 contiguous elements each, and packs 16 groups into a CTA on a
/// grid flat over all M * K/128 groups. Only the
/// `hopper` family carries the twin; on other targets its handle is 0 and the shared kernel runs.
/// The CTA floor below decides when the twin runs.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/export.hpp"
#include "kiln/gpu_backend.hpp"
#include "kiln/kernel_handle.hpp"

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
KILN_API std::string_view to_string(Fp8HopperReject reason);

/// `ceil(FP8_QUANT_MIN_CTAS_PER_SM * max(sm_count, 1))` (exact: a double holds every product).
inline std::uint64_t fp8_quant_min_ctas(std::uint32_t sm_count) {
  const double floor = FP8_QUANT_MIN_CTAS_PER_SM * (sm_count > 0 ? sm_count : 1);
  const auto whole = static_cast<std::uint64_t>(floor);
  return whole + (static_cast<double>(whole) < floor);
}
/// Why the twin does not run for a launch whose twin grid has `twin_ctas` CTAs, or nothing when it
/// runs. In this order: twin absent -> absent; no shared kernel -> nothing (a refusal would hand the
/// launch to a kernel that does not exist); lever off -> not_requested; below
/// `fp8_quant_min_ctas(sm_count)` -> too_few_ctas. Inline because `pick_with` runs it per launch,
/// which is what keeps a pick near 10 ns.
inline std::optional<Fp8HopperReject> fp8_act_quant_hopper_reject_ctas(bool requested, bool twin_present,
                                                                       bool shared_present, std::uint64_t twin_ctas,
                                                                       std::uint32_t sm_count) {
  if (!twin_present) return Fp8HopperReject::absent;
  if (!shared_present) return std::nullopt;
  if (!requested) return Fp8HopperReject::not_requested;
  if (twin_ctas < fp8_quant_min_ctas(sm_count)) return Fp8HopperReject::too_few_ctas;
  return std::nullopt;
}

/// Module of the shared quantizer; the file and the kernel share this name.
inline constexpr std::string_view FP8_QUANT_MODULE = "per_token_group_quant_fp8";
/// Entry point of the shared quantizer.
inline constexpr std::string_view FP8_QUANT_ENTRY = "per_token_group_quant_fp8";
/// The shared quantizer with the grid-dependency steps, in the same module: what a launch with
/// PDL runs (the plain entry leaves the steps out; on its one-group CTAs they halved throughput).
inline constexpr std::string_view FP8_QUANT_PDL_ENTRY = "per_token_group_quant_fp8_pdl";
/// Module (file stem) of the Hopper twin.
inline constexpr std::string_view FP8_QUANT_HOPPER_MODULE = "fp8_act_quant_hopper";
/// Entry point of the Hopper twin. It differs from the shared entry point, so a Hopper image
/// carries both kernels.
inline constexpr std::string_view FP8_QUANT_HOPPER_ENTRY = "per_token_group_quant_fp8_hopper";

/// Elements per quantization group (one fp32 scale each).
inline constexpr std::uint32_t FP8_QUANT_GROUP = 128;
/// K-groups one Hopper CTA covers: 128 threads / 8 threads per group, as `HQ_GROUPS_PER_CTA` in
/// the `.cu`. The twin's grid is flat over all M * L groups, 16 consecutive groups per CTA
/// (SGLang's geometry; 1-9% faster than a row-looping grid at 512..16384 rows on the H200:
/// docs/performance.md, "The flat grid").
inline constexpr std::uint32_t FP8_QUANT_HOPPER_GROUPS_PER_CTA = 16;
/// Threads per K-group in a Hopper CTA, and the contiguous elements each owns (lane `l` owns
/// `[16 l, 16 l + 16)` of its group: two `uint4` loads, one `uint4` store).
inline constexpr std::uint32_t FP8_QUANT_HOPPER_LANES = 8;
inline constexpr std::uint32_t FP8_QUANT_HOPPER_RUN = 16;

/// Largest grid X extent (2^31-1): M is on grid X in the shared arm, the twin's CTAs in its arm
/// (capped there; the kernel loops over what a capped grid leaves).
inline constexpr std::uint32_t FP8_QUANT_MAX_GRID_X = 0x7FFFFFFFu;
/// Largest grid Y extent (65535): binds only the shared arm, whose Y is K/128.
inline constexpr std::uint32_t FP8_QUANT_MAX_GRID_Y = 65535;

/// What `launch` does with a pick: launch `kernel` on `grid`, return at once (a no-op), or refuse
/// with an error naming the limit. Every value but `launch` comes with kernel 0 and grid (0, 0, 0),
/// so a pick never describes a launch that cannot happen.
enum class Fp8QuantAction : std::uint8_t {
  launch,           ///< `kernel` on `grid`
  noop,             ///< m == 0 or k == 0: nothing to quantize, nothing launched
  k_not_multiple,   ///< refused: k is not a multiple of 128
  m_past_grid_x,    ///< refused: m > 2^31-1 (grid X)
  k_past_grid_y,    ///< refused: the shared kernel runs and k/128 > 65535 (grid Y)
  twin_misaligned,  ///< refused: the twin is the only kernel and x or q is not 16-byte aligned
};

/// "launch", "no-op", or the refusal's limit in words.
KILN_API std::string_view to_string(Fp8QuantAction action);

/// The checks `launch` makes on a shape, in its order, given which kernel the rule chose (`twin`):
/// k a multiple of 128, m <= 2^31-1, then m == 0 or k == 0 is a no-op, then the shared kernel's
/// k/128 <= 65535. The one place these limits live: `pick_with` calls it, and `launch` acts on its
/// pick's verdict, so a pick and a launch cannot disagree. Pure.
constexpr Fp8QuantAction fp8_quant_action(bool twin, std::uint32_t m, std::uint32_t k) {
  if (k % FP8_QUANT_GROUP != 0) return Fp8QuantAction::k_not_multiple;
  if (m > FP8_QUANT_MAX_GRID_X) return Fp8QuantAction::m_past_grid_x;
  if (m == 0 || k == 0) return Fp8QuantAction::noop;
  if (!twin && k / FP8_QUANT_GROUP > FP8_QUANT_MAX_GRID_Y) return Fp8QuantAction::k_past_grid_y;
  return Fp8QuantAction::launch;
}

/// One launch decision: kernel and grid come from the same `twin` flag.
///
/// When `action` is not `launch`, nothing runs: `kernel` is 0, `grid` (0, 0, 0) and `twin` false;
/// `reject` keeps why the twin was not chosen only for `k_past_grid_y` (the refusal concerns the
/// shared kernel the rule chose) and is empty otherwise. `twin == !reject` holds for every launch.
struct Fp8QuantPick {
  KernelHandle kernel;                   ///< what to launch (0: nothing available, or nothing runs)
  std::array<std::uint32_t, 3> grid{};   ///< grid for `kernel`
  bool twin = false;                     ///< the Hopper twin runs
  std::optional<Fp8HopperReject> reject; ///< why the twin does not run; empty when it does
  bool requested = false;                ///< the lever's value this pick used
  Fp8QuantAction action = Fp8QuantAction::launch;  ///< launch, no-op, or why `launch` refuses

  bool launches() const noexcept { return action == Fp8QuantAction::launch; }
  /// Refused by `launch` (neither a launch nor a no-op).
  bool refused() const noexcept { return action != Fp8QuantAction::launch && action != Fp8QuantAction::noop; }
};

/// Throws the kiln::Error `launch` throws for a refused pick of `(m, k)`, naming the argument and
/// the limit (`invalid argument 'm': expected at most 2^31-1 rows (grid X limit), got ...`); returns
/// for a launch or a no-op. The C pick and plan and `kiln pick` refuse through it, as `launch` does.
KILN_API void fp8_quant_require_launchable(const Fp8QuantPick& chosen, std::uint32_t m, std::uint32_t k);

/// The FP8 activation quantizer a layer launches: the shared kernel, plus the Hopper twin when the
/// device's image has one.
class KILN_API Fp8ActQuant {
 public:
  /// No quantizer: both handles are 0.
  Fp8ActQuant() = default;
  /// `shared_pdl`: the shared kernel's PDL entry (FP8_QUANT_PDL_ENTRY); without it a PDL launch of
  /// the shared kernel is a plain one.
  Fp8ActQuant(KernelHandle shared, KernelHandle hopper, std::uint32_t sm_count, KernelHandle shared_pdl = {})
      : shared_(shared), hopper_(hopper), shared_pdl_(shared_pdl), sm_count_(sm_count) {}

  /// Probe both kernels on `gpu`; a missing one resolves to 0. The SM count is `gpu`'s.
  static Fp8ActQuant resolve(GpuBackend& gpu);
  /// A quantizer with only the shared kernel.
  static Fp8ActQuant shared_only(KernelHandle shared, std::uint32_t sm_count = 0);

  KernelHandle shared() const noexcept { return shared_; }
  KernelHandle hopper() const noexcept { return hopper_; }
  std::uint32_t sm_count() const noexcept { return sm_count_; }

  /// Is there a quantizer to launch at all? True when either handle is loaded, whatever the width;
  /// `pick` is the per-launch choice.
  bool available() const noexcept { return shared_.loaded() || hopper_.loaded(); }
  /// Is the twin in this image? Whether a launch uses it is `Fp8QuantPick::twin`.
  bool twin_present() const noexcept { return hopper_.loaded(); }

  /// Which kernel this `(m, k)` launches, on which grid, and why not the other, from the process's
  /// lever and the device's SM count; or that it is a no-op, or which limit `launch` refuses it by
  /// (`Fp8QuantPick::action`). Logs the verdict of a launch once per process per slot.
  Fp8QuantPick pick(std::uint32_t m, std::uint32_t k) const;
  /// `pick` over an explicit lever value and SM count. Pure, so CPU tests can grade any `(m, k)`.
  Fp8QuantPick pick_with(bool requested, std::uint32_t m, std::uint32_t k, std::uint32_t sm_count) const;
  /// `pick_with` for pointers that may not suit the twin: when `twin_aligned` is false and the
  /// shared kernel exists, the shared kernel runs and the reason is `misaligned`; without a shared
  /// kernel the action is `twin_misaligned`.
  Fp8QuantPick pick_with(bool requested, std::uint32_t m, std::uint32_t k, std::uint32_t sm_count,
                         bool twin_aligned) const;

  /// Quantize row-major bf16 `x[m, k]` into e4m3 `q[m, k]` and fp32 `scales[m, k/128]` on the
  /// caller's `stream` (a CUstream; nullptr is the legacy default stream), with the kernel and grid
  /// of one `pick`. All pointers are device pointers. Validated before any launch, with an error
  /// naming the argument: `k` a multiple of 128; non-null pointers; `x` 2-byte and `scales` 4-byte
  /// aligned (the twin also wants `x` and `q` 16-byte aligned, else the shared kernel runs);
  /// `m` <= 2^31-1 (grid X); for the shared kernel `k/128` <= 65535 (grid Y). `m == 0` or
  /// `k == 0` is a no-op. Throws kiln::Error when no kernel is available. Returns the pick used
  /// (`action` launch or noop); the shape checks are `fp8_quant_action`'s, the same as every pick's.
  /// `options` with the process's `KILN_PDL` folded in (quant_launch_options) go to the launch; with
  /// PDL the shared kernel runs as its PDL entry (or, without that handle, is launched plainly).
  Fp8QuantPick launch(GpuBackend& gpu, const void* x, void* q, float* scales, std::uint32_t m,
                      std::uint32_t k, void* stream, LaunchOptions options = {}) const;
  /// `launch` with an explicit lever value instead of the process's, as `pick_with` is to `pick`.
  Fp8QuantPick launch_with(bool requested, GpuBackend& gpu, const void* x, void* q, float* scales,
                           std::uint32_t m, std::uint32_t k, void* stream, LaunchOptions options = {}) const;

  /// Launches a pick `launch` made (or one the quantizer family's pick made of these kernels):
  /// `chosen.kernel` on `chosen.grid`, the shared kernel as its PDL entry when `options` (with the
  /// process's KILN_PDL) ask for PDL. No checks and no log: the caller made them.
  void launch_picked(GpuBackend& gpu, const Fp8QuantPick& chosen, const void* x, void* q, float* scales,
                     std::uint32_t m, std::uint32_t k, void* stream, LaunchOptions options) const;

  /// The handle this `(m, k)` launches.
  KernelHandle kernel(std::uint32_t m, std::uint32_t k) const { return pick(m, k).kernel; }
  /// The grid for `(m, k)`, from the same pick as `kernel`.
  std::array<std::uint32_t, 3> grid(std::uint32_t m, std::uint32_t k) const { return pick(m, k).grid; }

 private:
  KernelHandle shared_;
  KernelHandle hopper_;
  KernelHandle shared_pdl_;
  std::uint32_t sm_count_ = 0;
};

/// Grid for one quantizer launch. Pure.
///
/// Shared arm: `(M, K/128, 1)`, one CTA per K-group; the kernel reads the row from `blockIdx.x`
/// (X allows 2^31-1 blocks, Y only 65535) and the group from `blockIdx.y`.
/// Hopper arm: `(min(ceil(M * L / 16), 2^31-1), 1, 1)`, L = K/128: flat over the M * L groups,
/// which are contiguous in memory, 16 to a CTA (`FP8_QUANT_HOPPER_GROUPS_PER_CTA`); consecutive CTAs
/// stream consecutive memory and only the last CTA can have idle slots. The cap never binds for a
/// tensor that fits in memory; past it the kernel's slots loop (`fp8_quant_hopper_group`). The grid
/// is arithmetic only: whether it can launch is `fp8_quant_action`'s answer (M = 0 or K = 0 gives a
/// grid with a 0 extent).
///
/// Inline, because `pick_with` runs per launch.
constexpr std::array<std::uint32_t, 3> fp8_quant_grid(bool hopper, std::uint32_t m, std::uint32_t k) {
  const std::uint32_t groups = k / FP8_QUANT_GROUP;
  if (!hopper) return {m, groups, 1};
  const std::uint64_t total = std::uint64_t{m} * groups;
  const std::uint64_t ctas = total / FP8_QUANT_HOPPER_GROUPS_PER_CTA + (total % FP8_QUANT_HOPPER_GROUPS_PER_CTA != 0);
  return {static_cast<std::uint32_t>(ctas < FP8_QUANT_MAX_GRID_X ? ctas : FP8_QUANT_MAX_GRID_X), 1, 1};
}

// Why inline: a layer picks per launch, and a call into the library costs as much as the pick.
inline Fp8QuantPick Fp8ActQuant::pick_with(bool requested, std::uint32_t m, std::uint32_t k,
                                           std::uint32_t sm_count) const {
  const auto twin_grid = fp8_quant_grid(true, m, k);
  const auto reject = fp8_act_quant_hopper_reject_ctas(requested, twin_present(), shared_.loaded(),
                                                       std::uint64_t{twin_grid[0]} * twin_grid[1], sm_count);
  const bool twin = !reject.has_value();
  const Fp8QuantAction action = fp8_quant_action(twin, m, k);
  if (action == Fp8QuantAction::launch)
    return Fp8QuantPick{twin ? hopper_ : shared_, twin ? twin_grid : fp8_quant_grid(false, m, k), twin, reject,
                        requested, action};
  // Why the reject survives only k_past_grid_y: that refusal is about the kernel the rule chose;
  // the others are about the shape, where a floor verdict (0 CTAs at m == 0) would be noise.
  return Fp8QuantPick{{}, {}, false, action == Fp8QuantAction::k_past_grid_y ? reject : std::nullopt, requested,
                      action};
}

/// The group (index into the M * L row-major groups) that slot `sub` of Hopper CTA `cta` works on
/// in pass `pass` of a grid of `grid_x` CTAs, as the `.cu` computes it: `(pass * grid_x + cta) * 16
/// + sub`. The slot stops at the first group >= M * L. Host tests walk it to check that the grid
/// and the kernel's loop cover every group once.
constexpr std::uint64_t fp8_quant_hopper_group(std::uint32_t cta, std::uint32_t sub, std::uint32_t grid_x,
                                               std::uint64_t pass) {
  return (pass * grid_x + cta) * FP8_QUANT_HOPPER_GROUPS_PER_CTA + sub;
}

/// Thread `tid` of a Hopper CTA: its group slot and where its run of `FP8_QUANT_HOPPER_RUN`
/// contiguous elements starts within the slot's 128-element group, as `sub`/`lane` in the `.cu`.
struct Fp8HopperLane {
  std::uint32_t sub;
  std::uint32_t start;
};
constexpr Fp8HopperLane fp8_quant_hopper_lane(std::uint32_t tid) {
  return {tid / FP8_QUANT_HOPPER_LANES, tid % FP8_QUANT_HOPPER_LANES * FP8_QUANT_HOPPER_RUN};
}

}  // namespace kiln::ops

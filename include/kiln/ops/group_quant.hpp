#pragma once
/// @file
/// The per-token-group quantizer family: every variant vLLM and SGLang call (bf16/fp16/fp32 in,
/// group 32/64/128, e4m3 or int8 out, row-major, column-major, TMA-aligned or UE8M0-packed
/// scales, fused SiLU-and-mul), one C++ entry point. Each variant is a compile-time
/// specialisation of `kernels_src/common/per_token_group_quant.cu`, compiled (or read from the
/// disk cache) the first time it is resolved on a device.
///
/// Numerics, for every variant (vLLM's `per_token_group_quant_fp8` / `_int8` CUDA kernels):
///   v      = x, or silu(x[:, :K]) * x[:, K:] in fp32 (silu(g) = g / (1 + e^-g));
///   scale  = max(max|v| over the group, eps) / QMAX (IEEE division; QMAX 448 for e4m3, 127 int8);
///            with ue8m0, the smallest power of two >= max(scale, 1e-10);
///   code   = clamp(v / scale, QMIN, QMAX) (IEEE division; QMIN -448 or -128; NaN -> QMIN), then
///            e4m3 round-to-nearest-even, or int8 truncation toward zero.
///
/// Every call of every variant goes through one pick (group_quant_pick.hpp): the seed's variant
/// (bf16, group 128, e4m3, row-major fp32 scales) can also run the seed's two kernels, the Hopper
/// twin and the shared kernel; every variant can run the family kernel, with one or two groups per
/// slot.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.hpp"
#include "kiln/kernel_handle.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant_pick.hpp"

namespace kiln {
class GpuBackend;
}

namespace kiln::ops {

enum class QuantInput : std::uint8_t { bf16, fp16, fp32 };
enum class QuantOutput : std::uint8_t { e4m3, int8 };
enum class QuantScales : std::uint8_t {
  row_major,         ///< fp32 [M, G], G = K / group
  column_major,      ///< fp32, memory order [G, M]: scale of (row r, group g) at g * M + r
  column_major_tma,  ///< as column_major with M padded to a multiple of 4: g * M4 + r (pad untouched)
  ue8m0_packed,      ///< int32 [ceil(G/4), M4]: byte g % 4 of word (g / 4) * M4 + r is the exponent
                     ///< (the scale is 2^(byte - 127)); padding bytes and rows are written as 0
};

/// One variant: the compile-time parameters. Not every combination exists (`refusal`).
struct KILN_API QuantVariant {
  QuantInput input = QuantInput::bf16;
  std::uint32_t group = 128;  ///< 32, 64 or 128
  QuantOutput output = QuantOutput::e4m3;
  QuantScales scales = QuantScales::row_major;
  bool ue8m0 = false;         ///< power-of-two scales (required by ue8m0_packed)
  bool silu_and_mul = false;  ///< x is [M, 2K]: quantize silu(x[:, :K]) * x[:, K:]

  /// Why this combination does not exist, naming the parameter and the allowed values; "" when it
  /// does.
  std::string refusal() const;
  /// The module that compiles it: `per_token_group_quant-bf16-g128-e4m3-row` and so on (the name in
  /// the cache, the dumps and `kiln list --variants`). Throws kiln::Error when refusal() is not "".
  std::string module_name() const;
  /// `in=bf16 group=128 ...`, the manifest spelling.
  std::string description() const;

  friend bool operator==(const QuantVariant& a, const QuantVariant& b) noexcept {
    return a.input == b.input && a.group == b.group && a.output == b.output && a.scales == b.scales &&
           a.ue8m0 == b.ue8m0 && a.silu_and_mul == b.silu_and_mul;
  }
};

/// One call's tensors. All pointers are device pointers of the service's device. With `experts`
/// set, a batch of experts (MoE): x is [experts, m, x_row_stride] (experts x_expert_stride elements
/// apart), q [experts, m, k] dense, and the scales one block per expert, each in the variant's
/// layout over m rows (quant_scales_bytes(variant, m, k) bytes apart, the whole buffer `experts`
/// times that).
struct QuantArgs {
  const void* x = nullptr;   ///< [m, x_row_stride] elements of the input type, 16-byte aligned
  void* q = nullptr;         ///< [m, k] codes (1 byte each), dense, 16-byte aligned (fp32 input: 8)
  void* scales = nullptr;    ///< per QuantScales, 4-byte aligned
  std::uint64_t m = 0;       ///< rows (tokens); of a batch, rows (slots) per expert
  std::uint64_t k = 0;       ///< output columns: a multiple of the group
  /// Elements between row starts of x; 0 means dense (k, or 2k with SiLU). At least that; its
  /// bytes a multiple of 16.
  std::uint64_t x_row_stride = 0;
  float eps = 1e-10f;        ///< floor of the group max: finite, >= 0
  void* stream = nullptr;    ///< a CUstream (nullptr: the legacy default stream)
  /// PDL and the like; the process's `KILN_PDL` is folded in (quant_launch_options).
  LaunchOptions options{};
  /// Experts in a batch (1 to 65535); 0: one [m, k] matrix.
  std::uint64_t experts = 0;
  /// Elements between experts' first rows of x; 0: dense (m * the row stride). At least that, its
  /// bytes a multiple of 16.
  std::uint64_t x_expert_stride = 0;
  /// Of a batch, optional: device int32 [experts], read by the kernel (no host sync, capturable in a
  /// CUDA graph). Expert e's rows are [0, min(masked_m[e], m)) (none when negative); its other
  /// rows of q and of the scales, padding included, are neither read nor written. nullptr: all m.
  const std::int32_t* masked_m = nullptr;
};

/// Every variant that exists (180), in a fixed order: input, group, output, scales, ue8m0, SiLU.
KILN_API std::vector<QuantVariant> every_quant_variant();

/// Bytes of the scales buffer for `(m, k)`: what the caller allocates. Throws kiln::Error for an
/// impossible variant, `k` not a multiple of the group, `m` > 2^31-1, or a size past 2^64 bytes.
KILN_API std::uint64_t quant_scales_bytes(const QuantVariant& variant, std::uint64_t m, std::uint64_t k);
/// Bytes of a batch's scales buffer: `experts` blocks of quant_scales_bytes(variant, m, k), one per
/// expert (experts 0: one matrix, the same as above). Throws as above, and for more than 65535
/// experts or a total past 2^64 bytes.
KILN_API std::uint64_t quant_scales_bytes(const QuantVariant& variant, std::uint64_t m, std::uint64_t k,
                                          std::uint64_t experts);

/// How one call ran: its pick and the handle launched (0 for a no-op).
struct QuantLaunch {
  QuantPick pick;
  KernelHandle kernel;
  bool noop() const noexcept { return pick.noop; }
};

/// A variant resolved on one device: the one op of the quantizer family, the seed variant included.
/// Every launch goes through one pick (group_quant_pick.hpp).
class KILN_API GroupQuant {
 public:
  GroupQuant() = default;
  /// Resolves `variant` on `gpu`, loading only what its calls can run: for the seed variant the
  /// twin where the target carries it, the shared kernel (the small grids), and its family module
  /// where neither the twin nor the device's rule takes the large grids (elsewhere the first call
  /// that needs it loads it, or prepare()); any other variant, its own module. Throws kiln::Error for an impossible variant, before any
  /// compile.
  static GroupQuant resolve(GpuBackend& gpu, const QuantVariant& variant);

  const QuantVariant& variant() const noexcept { return variant_; }
  /// The family kernel's handle (0 when it did not compile or load, or is not loaded yet).
  KernelHandle kernel() const noexcept { return kernel_; }
  /// The seed variant's Hopper twin (0 elsewhere, and on targets without the hopper family).
  KernelHandle twin() const noexcept { return twin_; }
  /// The handle `chosen` launches, when resolve loaded it (0 otherwise: the call loads it).
  KernelHandle handle_of(const QuantPick& chosen) const noexcept;
  /// Something can launch.
  bool available() const noexcept;
  /// Loads every kernel a call of this variant can launch, so that no call loads one (in a CUDA
  /// graph capture, on a latency path): for the seed variant also its family module, which takes
  /// the calls the seed kernels cannot. True when they are all there.
  bool prepare(GpuBackend& gpu) const;

  /// The pick for `args` on `gpu` (the process's levers, the device's SM count and rule). Checks
  /// `args` first, as launch does.
  QuantPick pick(const GpuBackend& gpu, const QuantArgs& args) const;
  /// Checks `args` (naming the argument, what was expected and the valid range), then quantizes
  /// with the kernel and grid of `pick`. Throws kiln::Error when nothing can run or the launch fails.
  QuantLaunch launch(GpuBackend& gpu, const QuantArgs& args) const;
  /// `launch` with the kernel named by the caller, for A/B runs and the GPU suite. Throws
  /// kiln::Error (invalid argument) when that kernel cannot take the call: the twin or the shared
  /// kernel for another variant or a call outside the seed kernels, the twin where it is absent or
  /// x or q is misaligned, two groups for a variant that ships one.
  QuantLaunch launch_as(GpuBackend& gpu, const QuantArgs& args, QuantKernel kernel) const;

  /// The checks `launch` makes, without a GPU. Throws kiln::Error.
  static void check(const QuantVariant& variant, const QuantArgs& args);
  /// The one pick, pure: which kernel `variant` runs for `inputs`, on which grid, and why each
  /// other candidate does not. Expects a shape check() accepts.
  static QuantPick pick_with(const QuantVariant& variant, const QuantPickInputs& inputs);
  /// Whether the seed kernels take this call: eps 1e-10, dense rows, k/128 <= 65535.
  static bool seed_call(const QuantArgs& args);
  /// Group slots in one 256-thread CTA of the family kernel: 256 / lanes per group.
  static std::uint32_t groups_per_cta(const QuantVariant& variant);
  /// Groups each slot takes (the kernel's KILN_Q_ITEMS): with the fused SiLU 1, or 2 where a group
  /// has two lanes (16-bit input, group 32) and the scales are not packed; without it 2, or 1 for
  /// 16-bit input to e4m3 with fp32 scales.
  static std::uint32_t items_per_slot(const QuantVariant& variant);
  /// The grid for `(m, k)` of the family kernel with `items` groups per slot, 1-D: with row-major
  /// scales ceil(m * G / (groups_per_cta * items)) CTAs, flat over (row, group); with column-major
  /// scales tiles of 4 * items rows by groups_per_cta / 4 groups (over m padded to 4 and G padded to
  /// 4 for the packed layout, whose padding the tiles write as zeros).
  static std::array<std::uint32_t, 3> grid(const QuantVariant& variant, std::uint64_t m, std::uint64_t k,
                                           std::uint32_t items);
  /// The grid of the kernel the variant ships (items_per_slot groups per slot).
  static std::array<std::uint32_t, 3> grid(const QuantVariant& variant, std::uint64_t m, std::uint64_t k) {
    return grid(variant, m, k, items_per_slot(variant));
  }
  /// The grid of a batch's kernel (`per_token_group_quant_batched`, the variant's shipped groups per
  /// slot): (CTAs per expert, experts). Each expert's CTAs loop over its rows, so with `masked` the
  /// first number is capped near QUANT_MASKED_CTAS_PER_SM CTAs per SM over all experts instead of
  /// growing with m (an unknown SM count, 0, takes the cap off).
  static std::array<std::uint32_t, 3> batched_grid(const QuantVariant& variant, std::uint64_t experts, std::uint64_t m,
                                                   std::uint64_t k, bool masked, std::uint32_t sm_count);
  /// The module of the variant's batched form: `per_token_group_quant_batched-bf16-g128-e4m3-row`
  /// and so on (compiled on the first batched call, or by prepare_batched).
  static std::string batched_module_name(const QuantVariant& variant);
  /// Loads the variant's batched kernel now, so that no batched call loads it. True when it is there.
  bool prepare_batched(GpuBackend& gpu) const;
  /// The tiles a row spans on the tiled grids (a CTA's row tile is its index divided by this),
  /// ceil(G / (groups_per_cta / 4)) over G padded to 4 for the packed layout; 0 on the flat grid.
  static std::uint32_t tiles_per_row(const QuantVariant& variant, std::uint64_t k);

 private:
  QuantPickInputs inputs_of(const GpuBackend& gpu, const QuantArgs& args) const;
  QuantLaunch run(GpuBackend& gpu, const QuantArgs& args, const QuantPick& chosen) const;
  QuantLaunch run_family(GpuBackend& gpu, const QuantArgs& args, const QuantPick& chosen) const;
  QuantLaunch run_batched(GpuBackend& gpu, const QuantArgs& args, const QuantPick& chosen) const;

  QuantVariant variant_;
  KernelHandle kernel_;
  KernelHandle one_group_kernel_;  ///< 0 unless the variant ships two groups per slot
  // The seed variant's kernels; the shared ones are 0 until resolve loads them (the device's rule
  // prefers them) or, elsewhere, for good: a call that needs them asks the backend again.
  KernelHandle twin_;
  KernelHandle shared_;
  KernelHandle shared_pdl_;
  bool prefers_shared_ = false;  ///< the device's rule (quant_prefers_shared)
};

}  // namespace kiln::ops

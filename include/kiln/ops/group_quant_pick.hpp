#pragma once
/// @file
/// The one pick of the quantizer family: which kernel a call runs, on which grid, and why each
/// other candidate does not, in the same terms for every variant.
///
/// The candidates, in the order the pick weighs them:
/// - the seed's Hopper twin: the seed variant only, on targets that carry the hopper family; the
///   seed core (`Fp8ActQuant::pick_with`, its reject order and CTA floor) decides it;
/// - the seed's shared kernel: the seed variant only, below the seed's CTA floor (where its CTAs all
///   start at once and it is the faster), and wherever the device's rule says its CTA starts keep up
///   with the memory (quant_prefers_shared, src/ops/quant_device_rule.hpp);
/// - the family kernel with two groups per slot, for the variants that ship it;
/// - the family kernel with one group per slot: `per_token_group_quant_one_group` of a variant that
///   ships two, or the only family kernel of a variant that ships one. The variants that ship two
///   take it while its grid is small, where two groups a thread quantizes one after the other is
///   the kernel's time, and keep two where bandwidth decides.
/// A batch of experts (QuantArgs::experts) runs the family kernel's batched form, with the groups per
/// slot the variant ships, whatever the variant. As in the seed's pick, the kernel and its grid come
/// from one decision (`QuantPick::kernel`).

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/export.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::ops {

/// Entry point of the kernel every family variant ships (the family's name, too).
inline constexpr std::string_view QUANT_ENTRY = "per_token_group_quant";
/// Entry point of the one-group-per-slot kernel, in the modules of variants that ship two.
inline constexpr std::string_view QUANT_ONE_GROUP_ENTRY = "per_token_group_quant_one_group";

/// Entry point of a batch's kernel, in the variant's batched module (GroupQuant::batched_module_name).
inline constexpr std::string_view QUANT_BATCHED_ENTRY = "per_token_group_quant_batched";

/// A masked batch's grid: at most this many CTAs per SM over all experts (two waves of 8), each
/// expert's CTAs looping over its valid rows, so that a batch whose slots are mostly empty starts
/// few idle CTAs (GroupQuant::batched_grid; docs/performance.md, "Batched and masked inputs").
inline constexpr std::uint32_t QUANT_MASKED_CTAS_PER_SM = 16;

/// The one-group kernel runs while its grid is at most this many CTAs per SM. Measured on an H100
/// (132 SMs; docs/performance.md, "The one-group pick"): one group was 8-24% faster at 16-128
/// rows, 3-4% at 2048 x 7168 (27 one-group CTAs per SM for 16-bit input), 0-2.4% at 4096 x 7168 (54)
/// and level (0.99-1.015) from 8192 x 7168 (108) on; on the H200 two groups won by 5-20 points at
/// 32768 x 7168 (434). 64 takes every shape where one group gained and none where it was level.
inline constexpr std::uint32_t QUANT_ONE_GROUP_MAX_CTAS_PER_SM = 64;

/// Where the twin does not run, the default variant's shared kernel (one CTA per group) runs while
/// its grid is at most this many CTAs per SM, where its CTAs start in about one wave and no CTA-start
/// rate binds it. Measured on an H100 without the twin (docs/performance.md, "The shared kernel and
/// the family kernel"): the shared kernel was 4-12% faster up to 10.6 CTAs per SM (1400 groups),
/// the family kernel 3% faster at 15.5 (2048) and 11% at 17.5 (2304).
inline constexpr std::uint32_t QUANT_SHARED_MAX_CTAS_PER_SM = 12;

/// Every kernel a call can run; indexes QuantPick::why.
enum class QuantKernel : std::uint8_t {
  twin,               ///< the seed's Hopper twin (per_token_group_quant_fp8_hopper)
  shared,             ///< the seed's shared kernel (per_token_group_quant_fp8)
  family_two_groups,  ///< per_token_group_quant of a variant that ships two groups per slot
  family_one_group,   ///< one group per slot (see the file comment)
};
inline constexpr std::size_t QUANT_KERNEL_COUNT = 4;
inline constexpr std::array<QuantKernel, QUANT_KERNEL_COUNT> QUANT_KERNELS{
    QuantKernel::twin, QuantKernel::shared, QuantKernel::family_two_groups, QuantKernel::family_one_group};

/// "twin", "shared", "family (two groups per slot)", "family (one group per slot)".
KILN_API std::string_view to_string(QuantKernel kernel);

/// Why a candidate runs, or why it does not: one list for every candidate. Stable values (kiln.h's
/// KILN_QUANT_WHY_*).
enum class QuantPickReason : std::uint8_t {
  chosen_by_caller,       ///< the caller named the kernel (GroupQuant::launch_as)
  seed_variant_only,      ///< twin, shared: only the seed variant has them
  not_shipped,            ///< two groups: the variant ships one group per slot
  outside_seed_kernels,   ///< twin, shared: eps other than 1e-10, strided rows, or k/128 > 65535
  absent,                 ///< not in this device's image (the twin: hopper family only), or not loaded
  twin_not_requested,     ///< KILN_FP8_ACT_QUANT_HOPPER=0
  twin_too_few_ctas,      ///< the twin's grid is below the CTA floor
  twin_misaligned,        ///< x or q not 16-byte aligned for the twin
  twin_fills_device,      ///< the twin's grid reaches the CTA floor: the twin runs
  device_prefers_family,  ///< the device's CTA starts are slow for its memory: the family kernel runs
  device_prefers_shared,  ///< the device's CTA starts keep up with its memory: the shared kernel runs
  one_group_small_grid,   ///< the one-group grid is within 64 CTAs per SM: one group per slot
  one_group_large_grid,   ///< the one-group grid passes 64 CTAs per SM: two groups per slot
  one_group_lever_off,    ///< KILN_Q_ONE_GROUP=0: two groups per slot
  sm_count_unknown,       ///< the device's SM count is unknown: two groups per slot
  only_kernel,            ///< the variant's only kernel for this call
  shared_small_grid,      ///< the shared grid is within QUANT_SHARED_MAX_CTAS_PER_SM: the shared kernel runs
  batched_input,          ///< a batch of experts: the family's batched kernel runs (its shipped groups per slot)
};
inline constexpr std::size_t QUANT_PICK_REASON_COUNT = 18;

/// The reason in words (for logs, `kiln pick`, kiln.h's pick struct and `kiln-bench`).
KILN_API std::string_view to_string(QuantPickReason reason);

/// One launch decision. `why[i]` is candidate i's reason: for `kernel`, why it runs; for every
/// other, why it does not.
struct QuantPick {
  bool noop = false;  ///< m == 0 or k == 0: nothing runs (kernel, grid and why are not set)
  QuantKernel kernel = QuantKernel::family_one_group;
  std::array<QuantPickReason, QUANT_KERNEL_COUNT> why{};
  std::array<std::uint32_t, 3> grid{};
  std::uint32_t block = 0;         ///< threads per CTA: 128 for the seed's kernels, 256 for the family's
  std::string_view entry;          ///< the kernel's entry point
  /// What the seed core said of the twin, for its once-per-slot log: set when it was asked.
  bool twin_asked = false;
  bool twin_requested = false;     ///< the lever value it used
  std::optional<Fp8HopperReject> twin_reject;

  QuantPickReason reason() const noexcept { return why[static_cast<std::size_t>(kernel)]; }
  QuantPickReason why_not(QuantKernel candidate) const noexcept { return why[static_cast<std::size_t>(candidate)]; }
  bool family() const noexcept { return kernel == QuantKernel::family_two_groups || kernel == QuantKernel::family_one_group; }
};

/// Everything the pick reads besides the variant, so that CPU tests and `kiln pick` can grade any
/// call on any device.
struct QuantPickInputs {
  std::uint64_t m = 0;
  std::uint64_t k = 0;
  std::uint32_t sm_count = 0;
  bool seed_call = true;       ///< the call is one the seed kernels take (eps 1e-10, dense rows, k/128 <= 65535)
  bool twin_aligned = true;    ///< x and q 16-byte aligned
  bool twin_present = false;   ///< the device's image carries the twin
  bool shared_present = true;  ///< the shared kernel can load
  bool prefers_shared = false; ///< quant_prefers_shared for the device
  bool twin_lever = true;      ///< KILN_FP8_ACT_QUANT_HOPPER
  bool one_group_lever = true; ///< KILN_Q_ONE_GROUP
  std::uint64_t experts = 0;   ///< QuantArgs::experts: 0 for one matrix, else a batch of m rows each
  bool masked = false;         ///< the batch has masked_m
};

struct QuantVariant;

/// The kernels `variant` has, before a device or a call decides (indexed by QuantKernel): every
/// variant has a family kernel with one group per slot; those that ship two also the two-group
/// kernel; the seed variant (bf16, group 128, e4m3, row-major fp32 scales) also the twin and the
/// shared kernel.
KILN_API std::array<bool, QUANT_KERNEL_COUNT> quant_kernels_of(const QuantVariant& variant);

/// Whether the default variant's shared kernel takes an (m, k) call where the twin does not run:
/// its grid (one CTA per group) is at most QUANT_SHARED_MAX_CTAS_PER_SM per SM (an unknown SM
/// count, 0, counts as one SM).
KILN_API bool quant_shared_grid_is_small(std::uint64_t m, std::uint64_t k, std::uint32_t sm_count);

/// `KILN_Q_ONE_GROUP` (a switch, default on): 0 keeps every variant on the kernel it ships, for
/// A/B runs against the pick. Read once per process; a bad value logs one warning.
KILN_API bool quant_one_group_lever();

}  // namespace kiln::ops

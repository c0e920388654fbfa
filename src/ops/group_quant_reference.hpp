#pragma once
/// @file
/// CPU reference of every variant of the quantizer family (group_quant.hpp has the numerics): the
/// bytes and scales a correct kernel writes. Independent of the kernel where it can be: e4m3 codes
/// by searching the decoded codes (fp8_reference.hpp), UE8M0 scales with frexp, int8 by C++
/// truncation; the fused SiLU uses the kernels' own portable e^x (quant_numerics.cuh) because any
/// other e^x would differ in the last bit. For tests and checks; not fast. Pure and thread-safe.

#include <cstdint>
#include <vector>

#include "kiln/ops/group_quant.hpp"

namespace kiln::ops {

/// Quantize host `x` (`m` rows of `x_row_stride` elements of `variant.input`, raw bits; 0 means
/// dense) into `q` (`[m, k]`) and `scales` (quant_scales_bytes(variant, m, k) bytes, the variant's
/// layout; column_major_tma's padding is left as it was, ue8m0_packed's is written as 0).
/// @throws kiln::Error as GroupQuant::check does for the shape, stride and eps (pointers are host
/// pointers here and need no alignment).
void group_quant_reference(const QuantVariant& variant, const void* x, std::uint64_t m, std::uint64_t k,
                           std::uint64_t x_row_stride, float eps, std::uint8_t* q, void* scales);

/// The same over a batch of experts (QuantArgs::experts): host `x` [experts, m, x_row_stride] with
/// `x_expert_stride` elements between experts (0: dense), `q` [experts, m, k], `scales` one
/// quant_scales_bytes(variant, m, k) block per expert. With `masked_m` (host, [experts]) expert e has
/// rows [0, min(masked_m[e], m)) (none when negative) and its other rows' bytes of q and scales,
/// padding included, are left as they were; without it each expert is group_quant_reference's.
void group_quant_batched_reference(const QuantVariant& variant, const void* x, std::uint64_t experts, std::uint64_t m,
                                   std::uint64_t k, std::uint64_t x_row_stride, std::uint64_t x_expert_stride,
                                   const std::int32_t* masked_m, float eps, std::uint8_t* q, void* scales);

/// The byte offsets, in one expert's (or one matrix's) scales over `m` rows, that hold row `row`'s
/// scales: each group's 4 bytes, or the packed layout's whole words (their padding bytes too).
std::vector<std::uint64_t> quant_scale_bytes_of_row(const QuantVariant& variant, std::uint64_t m, std::uint64_t k,
                                                    std::uint64_t row);

/// The float an IEEE half bit pattern holds (exact).
float fp16_to_float(std::uint16_t bits) noexcept;
/// The half nearest `value`, ties to even (for building inputs); NaN stays NaN, overflow gives inf.
std::uint16_t float_to_fp16(float value) noexcept;

}  // namespace kiln::ops

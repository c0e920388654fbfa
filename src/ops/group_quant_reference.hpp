#pragma once
/// @file
/// CPU reference of every variant of the quantizer family (group_quant.hpp has the numerics): the
/// bytes and scales a correct kernel writes. Independent of the kernel where it can be: e4m3 codes
/// by searching the decoded codes (fp8_reference.hpp), UE8M0 scales with frexp, int8 by C++
/// truncation; the fused SiLU uses the kernels' own portable e^x (quant_numerics.cuh) because any
/// other e^x would differ in the last bit. For tests and checks; not fast. Pure and thread-safe.

#include <cstdint>

#include "kiln/ops/group_quant.hpp"

namespace kiln::ops {

/// Quantize host `x` (`m` rows of `x_row_stride` elements of `variant.input`, raw bits; 0 means
/// dense) into `q` (`[m, k]`) and `scales` (quant_scales_bytes(variant, m, k) bytes, the variant's
/// layout; column_major_tma's padding is left as it was, ue8m0_packed's is written as 0).
/// @throws kiln::Error as GroupQuant::check does for the shape, stride and eps (pointers are host
/// pointers here and need no alignment).
void group_quant_reference(const QuantVariant& variant, const void* x, std::uint64_t m, std::uint64_t k,
                           std::uint64_t x_row_stride, float eps, std::uint8_t* q, void* scales);

/// The float an IEEE half bit pattern holds (exact).
float fp16_to_float(std::uint16_t bits) noexcept;
/// The half nearest `value`, ties to even (for building inputs); NaN stays NaN, overflow gives inf.
std::uint16_t float_to_fp16(float value) noexcept;

}  // namespace kiln::ops

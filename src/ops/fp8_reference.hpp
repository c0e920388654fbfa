#pragma once
/// @file
/// CPU reference of the FP8 activation quantizers (`per_token_group_quant_fp8` and its Hopper
/// twin): the bytes and scales a correct kernel writes, computed independently of the kernels' bit
/// tricks, and a comparison that names the first difference. For tests and checks; not fast.
///
/// Numerics (vLLM's per_token_group_quant_fp8), per 128-element group of a row:
/// - `absmax = fmax(1e-10, max |x|)`; fmax drops NaN, so NaN elements never raise it;
/// - `scale = absmax / 448` (fp32, one per group);
/// - `q = e4m3(clamp(x / scale, -448, 448))` by true division, round to nearest even; the clamp
///   drops NaN too, so a NaN element becomes -448 (0xFE).
/// Consequences: an infinite element makes the scale infinite, its group's finite elements +-0
/// (0x00, or 0x80 when negative) and its infinite and NaN elements 0xFE; an all-zero group gets
/// scale `1e-10f / 448` and q 0 (0x80 for -0).
///
/// Every function is pure and thread-safe.

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::ops {

/// Largest finite e4m3 (E4M3FN) magnitude.
inline constexpr float FP8_E4M3_MAX = 448.0f;
/// The floor of a group's absmax, so an all-zero group has a finite, nonzero scale.
inline constexpr float FP8_QUANT_EPS = 1e-10f;

/// The float a bf16 bit pattern holds (exact).
float bf16_to_float(std::uint16_t bits) noexcept;
/// The bf16 nearest `value`, ties to even (for building inputs); NaN stays a quiet NaN.
std::uint16_t float_to_bf16(float value) noexcept;

/// The value of an e4m3 code: bias 7, 3 mantissa bits, subnormals below 2^-6, no infinity,
/// 0x7F and 0xFF are NaN.
float e4m3_to_float(std::uint8_t code) noexcept;
/// The e4m3 code nearest `value`, ties to the even code, found by searching the decoded codes (not
/// by bit manipulation, so it checks the kernels). Finite values past +-448 and infinities give
/// +-448 (0x7E / 0xFE), as `cvt.rn.satfinite` does; NaN gives 0x7F; the sign of zero is kept.
std::uint8_t float_to_e4m3(float value) noexcept;

/// Quantize a row-major bf16 `[m, k]` (raw bits) into row-major e4m3 `q` `[m, k]` and row-major
/// fp32 `scales` `[m, k/128]`, with the numerics in this file's header. The caller owns all three
/// buffers, which must not overlap.
/// @throws kiln::Error when `k` is not a multiple of 128, or when `m * k > 0` and a pointer is null.
void fp8_quantize_reference(const std::uint16_t* x, std::uint32_t m, std::uint32_t k, std::uint8_t* q,
                            float* scales);

/// Which output of a quantizer a mismatch is in.
enum class Fp8Output { q, scale };

/// The first difference between two quantizer outputs for the same `[m, k]`.
struct Fp8Mismatch {
  Fp8Output output;          ///< a scale or a q byte
  std::uint64_t index;       ///< flat index into q (`[m, k]`) or scales (`[m, k/128]`)
  std::uint32_t row;         ///< row of that index
  std::uint32_t column;      ///< element (q) or group (scale) within the row
  std::uint32_t expected;    ///< the expected byte, or the expected scale's float bits
  std::uint32_t actual;      ///< the actual byte, or the actual scale's float bits
  std::uint64_t mismatches;  ///< how many q bytes and scales differ in all
};

/// Compare `actual` outputs with `expected` ones: scales bit for bit first (a wrong scale explains
/// the bytes after it), then q bytes. Nothing when all are equal.
/// @throws kiln::Error when `k` is not a multiple of 128, or when `m * k > 0` and a pointer is null.
std::optional<Fp8Mismatch> compare_fp8_outputs(const std::uint8_t* expected_q, const float* expected_scales,
                                               const std::uint8_t* actual_q, const float* actual_scales,
                                               std::uint32_t m, std::uint32_t k);

/// One line for a test log, e.g. `q[3, 17] (index 401): expected 0x3c (1.5), got 0x3d (1.625);
/// 2 mismatches in all`.
std::string to_string(const Fp8Mismatch& mismatch);

}  // namespace kiln::ops

#include "ops/group_quant_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kiln/error.hpp"
#include "ops/fp8_reference.hpp"
#include "quant_numerics.cuh"

namespace kiln::ops {

namespace {

float input_value(QuantInput input, const void* x, std::uint64_t index) {
  switch (input) {
    case QuantInput::bf16: return bf16_to_float(static_cast<const std::uint16_t*>(x)[index]);
    case QuantInput::fp16: return fp16_to_float(static_cast<const std::uint16_t*>(x)[index]);
    case QuantInput::fp32: {
      float value;
      std::memcpy(&value, static_cast<const char*>(x) + index * 4, 4);
      return value;
    }
  }
  return 0;
}

// The smallest power of two >= s (s > 0), by frexp rather than the kernel's exponent bits.
float power_of_two_at_least(float s) {
  if (std::isinf(s)) return s;
  int exponent = 0;
  const float fraction = std::frexp(s, &exponent);  // s = fraction * 2^exponent, fraction in [0.5, 1)
  return fraction == 0.5f ? s : std::ldexp(1.0f, exponent);
}

std::uint8_t code_of(QuantOutput output, float ratio) {
  if (output == QuantOutput::e4m3) {
    const float clamped = std::fmin(std::fmax(ratio, -FP8_E4M3_MAX), FP8_E4M3_MAX);
    return float_to_e4m3(clamped);
  }
  const float clamped = std::fmin(std::fmax(ratio, -128.0f), 127.0f);
  return static_cast<std::uint8_t>(static_cast<std::int8_t>(std::trunc(clamped)));
}

}  // namespace

float fp16_to_float(std::uint16_t bits) noexcept { return quant::fp16_bits_to_float(bits); }

std::uint16_t float_to_fp16(float value) noexcept {
  // Nearest half by scanning the 65536 codes once per process into a sorted table would be slow to
  // build; instead round the float's bits directly (inputs only, not a checked result).
  std::uint32_t u;
  std::memcpy(&u, &value, 4);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (a >= 0x38800000u) {                                                   // normal half
    const std::uint32_t rebased = a - 0x38000000u;
    const std::uint32_t rounded = (rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13;
    return static_cast<std::uint16_t>(sign | rounded);
  }
  // Subnormal half: a multiple of 2^-24.
  const float scaled = std::nearbyint(std::fabs(value) * 16777216.0f);
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(scaled));
}

void group_quant_reference(const QuantVariant& variant, const void* x, std::uint64_t m, std::uint64_t k,
                           std::uint64_t x_row_stride, float eps, std::uint8_t* q, void* scales) {
  QuantArgs shape;
  shape.m = 0;  // the shape checks only: the pointers are host pointers
  shape.k = k;
  shape.x_row_stride = x_row_stride;
  shape.eps = eps;
  GroupQuant::check(variant, shape);
  if (m == 0 || k == 0) return;
  if (x == nullptr || q == nullptr || scales == nullptr) throw_error("group_quant_reference: null buffer");

  const std::uint64_t groups = k / variant.group;
  const std::uint64_t stride = x_row_stride != 0 ? x_row_stride : (variant.silu_and_mul ? 2 * k : k);
  const std::uint64_t m4 = (m + 3) / 4 * 4;
  const float qmax = variant.output == QuantOutput::e4m3 ? FP8_E4M3_MAX : 127.0f;
  std::vector<float> v(variant.group);
  auto* scale_floats = static_cast<float*>(scales);
  auto* scale_bytes = static_cast<std::uint8_t*>(scales);
  if (variant.scales == QuantScales::ue8m0_packed) std::fill_n(scale_bytes, quant_scales_bytes(variant, m, k), 0);

  for (std::uint64_t row = 0; row < m; ++row) {
    for (std::uint64_t g = 0; g < groups; ++g) {
      float absmax = eps;
      for (std::uint32_t e = 0; e < variant.group; ++e) {
        const std::uint64_t at = row * stride + g * variant.group + e;
        float value = input_value(variant.input, x, at);
        if (variant.silu_and_mul) value = quant::silu_and_mul(value, input_value(variant.input, x, at + k));
        v[e] = value;
        absmax = std::fmax(absmax, std::fabs(value));
      }
      float scale = absmax / qmax;
      if (variant.ue8m0) scale = power_of_two_at_least(std::fmax(scale, 1e-10f));
      for (std::uint32_t e = 0; e < variant.group; ++e)
        q[row * k + g * variant.group + e] = code_of(variant.output, v[e] / scale);
      switch (variant.scales) {
        case QuantScales::row_major: scale_floats[row * groups + g] = scale; break;
        case QuantScales::column_major: scale_floats[g * m + row] = scale; break;
        case QuantScales::column_major_tma: scale_floats[g * m4 + row] = scale; break;
        case QuantScales::ue8m0_packed: {
          int exponent = 0;
          std::frexp(scale, &exponent);  // scale = 2^(exponent - 1)
          const int biased = std::isinf(scale) ? 255 : exponent - 1 + 127;
          scale_bytes[((g / 4) * m4 + row) * 4 + g % 4] = static_cast<std::uint8_t>(biased);
          break;
        }
      }
    }
  }
}

std::vector<std::uint64_t> quant_scale_bytes_of_row(const QuantVariant& variant, std::uint64_t m, std::uint64_t k,
                                                    std::uint64_t row) {
  const std::uint64_t groups = k / variant.group;
  const bool padded = variant.scales == QuantScales::column_major_tma || variant.scales == QuantScales::ue8m0_packed;
  const std::uint64_t rows = padded ? (m + 3) / 4 * 4 : m;
  std::vector<std::uint64_t> bytes;
  const auto word = [&](std::uint64_t index) {
    for (std::uint64_t b = 0; b < 4; ++b) bytes.push_back(index * 4 + b);
  };
  switch (variant.scales) {
    case QuantScales::row_major:
      for (std::uint64_t g = 0; g < groups; ++g) word(row * groups + g);
      break;
    case QuantScales::column_major:
    case QuantScales::column_major_tma:
      for (std::uint64_t g = 0; g < groups; ++g) word(g * rows + row);
      break;
    case QuantScales::ue8m0_packed:
      for (std::uint64_t w = 0; w < (groups + 3) / 4; ++w) word(w * rows + row);
      break;
  }
  return bytes;
}

void group_quant_batched_reference(const QuantVariant& variant, const void* x, std::uint64_t experts, std::uint64_t m,
                                   std::uint64_t k, std::uint64_t x_row_stride, std::uint64_t x_expert_stride,
                                   const std::int32_t* masked_m, float eps, std::uint8_t* q, void* scales) {
  const std::uint64_t row_stride = x_row_stride != 0 ? x_row_stride : (variant.silu_and_mul ? 2 * k : k);
  const std::uint64_t expert_stride = x_expert_stride != 0 ? x_expert_stride : m * row_stride;
  const std::uint64_t element = variant.input == QuantInput::fp32 ? 4 : 2;
  const std::uint64_t scale_bytes = quant_scales_bytes(variant, m, k);
  const bool padded = variant.scales == QuantScales::column_major_tma || variant.scales == QuantScales::ue8m0_packed;
  const std::uint64_t scale_rows = padded ? (m + 3) / 4 * 4 : m;
  for (std::uint64_t e = 0; e < experts; ++e) {
    const auto* x_expert = static_cast<const std::uint8_t*>(x) + e * expert_stride * element;
    std::uint8_t* q_expert = q + e * m * k;
    auto* scales_expert = static_cast<std::uint8_t*>(scales) + e * scale_bytes;
    // Why through copies: a masked expert's rows past its count must keep the bytes they had.
    std::vector<std::uint8_t> q_all(q_expert, q_expert + m * k);
    std::vector<std::uint8_t> scales_all(scales_expert, scales_expert + scale_bytes);
    group_quant_reference(variant, x_expert, m, k, row_stride, eps, q_all.data(), scales_all.data());
    const std::uint64_t valid =
        masked_m == nullptr ? scale_rows : masked_m[e] <= 0 ? 0 : std::min<std::uint64_t>(masked_m[e], m);
    for (std::uint64_t row = 0; row < valid; ++row) {
      if (row < m) std::copy(q_all.begin() + row * k, q_all.begin() + (row + 1) * k, q_expert + row * k);
      for (const std::uint64_t byte : quant_scale_bytes_of_row(variant, m, k, row)) scales_expert[byte] = scales_all[byte];
    }
  }
}

}  // namespace kiln::ops

#include "ops/fp8_reference.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::ops {

namespace {

constexpr std::uint8_t E4M3_MAX_CODE = 0x7e;
constexpr std::uint8_t E4M3_SIGN = 0x80;
constexpr std::uint8_t E4M3_NAN = 0x7f;

std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float bits_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The 127 non-negative finite magnitudes, index = code, increasing.
const std::array<float, E4M3_MAX_CODE + 1>& e4m3_magnitudes() {
  static const auto table = [] {
    std::array<float, E4M3_MAX_CODE + 1> t{};
    for (std::size_t c = 0; c < t.size(); ++c) t[c] = e4m3_to_float(static_cast<std::uint8_t>(c));
    return t;
  }();
  return table;
}

void check_shape(std::uint32_t m, std::uint32_t k, std::initializer_list<std::pair<const char*, const void*>> pointers) {
  if (k % FP8_QUANT_GROUP != 0)
    throw_invalid_argument("k", "a multiple of " + std::to_string(FP8_QUANT_GROUP), std::to_string(k));
  if (std::uint64_t{m} * k == 0) return;
  for (const auto& [name, pointer] : pointers)
    if (pointer == nullptr) throw_invalid_argument(name, "a non-null pointer when m * k > 0", "null");
}

std::string hex(std::uint32_t value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, value);
  return buf;
}

std::string number(float value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(value));
  return buf;
}

}  // namespace

float bf16_to_float(std::uint16_t bits) noexcept { return bits_float(std::uint32_t{bits} << 16); }

std::uint16_t float_to_bf16(float value) noexcept {
  const std::uint32_t bits = float_bits(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

float e4m3_to_float(std::uint8_t code) noexcept {
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                        : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return (code & E4M3_SIGN) ? -magnitude : magnitude;
}

std::uint8_t float_to_e4m3(float value) noexcept {
  if (std::isnan(value)) return E4M3_NAN;
  const std::uint8_t sign = std::signbit(value) ? E4M3_SIGN : 0;
  const float a = std::fabs(value);
  const auto& table = e4m3_magnitudes();
  const auto above = std::lower_bound(table.begin(), table.end(), a);
  if (above == table.end()) return sign | E4M3_MAX_CODE;
  auto code = static_cast<std::uint8_t>(above - table.begin());
  if (*above != a) {
    // Why double: both distances are exact there for the neighbours that can tie.
    const double up = static_cast<double>(*above) - a;
    const double down = a - static_cast<double>(table[code - 1]);
    if (down < up || (down == up && (code & 1u))) --code;
  }
  return sign | code;
}

void fp8_quantize_reference(const std::uint16_t* x, std::uint32_t m, std::uint32_t k, std::uint8_t* q,
                            float* scales) {
  check_shape(m, k, {{"x", x}, {"q", q}, {"scales", scales}});
  const std::uint32_t groups = k / FP8_QUANT_GROUP;
  for (std::uint64_t row = 0; row < m; ++row)
    for (std::uint32_t g = 0; g < groups; ++g) {
      const std::uint64_t base = row * k + std::uint64_t{g} * FP8_QUANT_GROUP;
      float absmax = FP8_QUANT_EPS;
      for (std::uint32_t i = 0; i < FP8_QUANT_GROUP; ++i) absmax = std::fmax(absmax, std::fabs(bf16_to_float(x[base + i])));
      const float scale = absmax / FP8_E4M3_MAX;
      scales[row * groups + g] = scale;
      for (std::uint32_t i = 0; i < FP8_QUANT_GROUP; ++i) {
        const float ratio = bf16_to_float(x[base + i]) / scale;
        q[base + i] = float_to_e4m3(std::fmin(std::fmax(ratio, -FP8_E4M3_MAX), FP8_E4M3_MAX));
      }
    }
}

std::optional<Fp8Mismatch> compare_fp8_outputs(const std::uint8_t* expected_q, const float* expected_scales,
                                               const std::uint8_t* actual_q, const float* actual_scales,
                                               std::uint32_t m, std::uint32_t k) {
  check_shape(m, k,
              {{"expected_q", expected_q}, {"expected_scales", expected_scales}, {"actual_q", actual_q},
               {"actual_scales", actual_scales}});
  const std::uint32_t groups = k / FP8_QUANT_GROUP;
  std::optional<Fp8Mismatch> first;
  std::uint64_t count = 0;
  auto note = [&](Fp8Output output, std::uint64_t index, std::uint32_t width, std::uint32_t expected,
                  std::uint32_t actual) {
    if (!first)
      first = Fp8Mismatch{output, index, static_cast<std::uint32_t>(index / width),
                          static_cast<std::uint32_t>(index % width), expected, actual, 0};
    ++count;
  };
  const std::uint64_t scale_count = std::uint64_t{m} * groups;
  for (std::uint64_t i = 0; i < scale_count; ++i) {
    const std::uint32_t e = float_bits(expected_scales[i]);
    const std::uint32_t a = float_bits(actual_scales[i]);
    if (e != a) note(Fp8Output::scale, i, groups, e, a);
  }
  const std::uint64_t q_count = std::uint64_t{m} * k;
  for (std::uint64_t i = 0; i < q_count; ++i)
    if (expected_q[i] != actual_q[i]) note(Fp8Output::q, i, k, expected_q[i], actual_q[i]);
  if (first) first->mismatches = count;
  return first;
}

std::string to_string(const Fp8Mismatch& mismatch) {
  const bool scale = mismatch.output == Fp8Output::scale;
  auto value = [&](std::uint32_t v) {
    return scale ? hex(v, 8) + " (" + number(bits_float(v)) + ")"
                 : hex(v, 2) + " (" + number(e4m3_to_float(static_cast<std::uint8_t>(v))) + ")";
  };
  return std::string(scale ? "scale[" : "q[") + std::to_string(mismatch.row) + ", " +
         std::to_string(mismatch.column) + "] (index " + std::to_string(mismatch.index) +
         "): expected " + value(mismatch.expected) + ", got " + value(mismatch.actual) + "; " +
         std::to_string(mismatch.mismatches) + (mismatch.mismatches == 1 ? " mismatch" : " mismatches") +
         " in all";
}

}  // namespace kiln::ops

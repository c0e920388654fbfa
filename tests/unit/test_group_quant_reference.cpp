// The quantizer family's CPU reference and the numerics it shares with the kernel
// (kernels_src/common/quant_numerics.cuh), checked against independent arithmetic.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../kernels_src/common/quant_numerics.cuh"
#include "ops/fp8_reference.hpp"
#include "ops/group_quant_reference.hpp"

using namespace kiln::ops;

namespace {

std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::vector<std::uint16_t> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = float_to_bf16(normal(rng) * std::ldexp(1.f, exponent(rng) / 4));
  const float specials[] = {0.f, -0.f, NAN, INFINITY, -INFINITY, 9.2e-41f, 3.38e38f};
  for (std::size_t i = 0; i < n; i += 37) x[i] = float_to_bf16(specials[(i / 37) % 7]);
  return x;
}

float ulp_distance(float a, double exact) {
  const float rounded = static_cast<float>(exact);
  const float ulp = std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded);
  return static_cast<float>(std::fabs(a - exact) / ulp);
}

}  // namespace

TEST_CASE("the seed variant's reference is the FP8 reference, byte for byte") {
  const std::uint32_t m = 37, k = 1024;
  const auto x = random_bf16(std::size_t{m} * k, 7);
  std::vector<std::uint8_t> q1(m * k), q2(m * k);
  std::vector<float> s1(m * k / 128), s2(m * k / 128);
  fp8_quantize_reference(x.data(), m, k, q1.data(), s1.data());
  group_quant_reference(QuantVariant{}, x.data(), m, k, 0, 1e-10f, q2.data(), s2.data());
  CHECK(q1 == q2);
  CHECK(std::memcmp(s1.data(), s2.data(), s1.size() * 4) == 0);
}

TEST_CASE("fp16 conversion is exact for every half, and float_to_fp16 inverts it") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float value = fp16_to_float(static_cast<std::uint16_t>(h));
    const std::uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exponent == 0x1f) {
      CHECK((mantissa == 0 ? std::isinf(value) : std::isnan(value)));
      continue;
    }
    const double expected = exponent == 0 ? sign * std::ldexp(mantissa, -24)
                                          : sign * std::ldexp(1024 + mantissa, static_cast<int>(exponent) - 25);
    REQUIRE(value == expected);
    REQUIRE(std::signbit(value) == (sign < 0));
    REQUIRE(float_to_fp16(value) == h);
  }
  CHECK(float_to_fp16(65520.f) == 0x7c00);  // rounds past the largest half
  CHECK(float_to_fp16(65519.f) == 0x7bff);
}

TEST_CASE("one_plus_exp is within 1.6 ulp of 1 + e^t over its whole domain") {
  float worst = 0;
  for (float t = -87.f; t <= 88.f; t += 0.0037f)
    worst = std::max(worst, ulp_distance(kiln::quant::one_plus_exp(t), 1.0 + std::exp(static_cast<double>(t))));
  CHECK(worst <= 1.6f);
  CHECK(kiln::quant::one_plus_exp(0.f) == 2.f);
  CHECK(kiln::quant::one_plus_exp(-87.f) == 1.f);
  CHECK(std::isfinite(kiln::quant::one_plus_exp(88.f)));
}

TEST_CASE("reciprocal_flushed is 1/d where that is a normal float and 0 where it would be subnormal") {
  CHECK(kiln::quant::reciprocal_flushed(1.f) == 1.f);
  CHECK(kiln::quant::reciprocal_flushed(0x1p126f) == 0x1p-126f);
  CHECK(kiln::quant::reciprocal_flushed(std::nextafter(0x1p126f, INFINITY)) == 0.f);
  CHECK(kiln::quant::reciprocal_flushed(3.f) == 1.f / 3.f);
}

TEST_CASE("silu_and_mul is gate * sigmoid(gate) * up to float accuracy, and 0 or NaN where it should be") {
  for (float gate = -80.f; gate < 80.f; gate += 0.0173f) {
    const double exact = gate / (1.0 + std::exp(-static_cast<double>(gate))) * 1.5;
    CHECK(std::fabs(kiln::quant::silu_and_mul(gate, 1.5f) - exact) <= 4e-7 * std::fabs(exact) + 1e-37);
  }
  CHECK(kiln::quant::silu_and_mul(-200.f, 2.f) == 0.f);
  CHECK(kiln::quant::silu_and_mul(-87.5f, 2.f) == 0.f);       // 1 + e^87.5 > 2^126: flushed
  CHECK(kiln::quant::silu_and_mul(-87.f, 1.f) < -1e-36f);     // 1 + e^87 < 2^126: still normal
  CHECK(kiln::quant::silu_and_mul(1e6f, 2.f) == 2e6f);
  CHECK(std::isnan(kiln::quant::silu_and_mul(NAN, 1.f)));
  CHECK(std::isnan(kiln::quant::silu_and_mul(-INFINITY, 1.f)));
  CHECK(std::isinf(kiln::quant::silu_and_mul(INFINITY, 1.f)));
}

TEST_CASE("UE8M0 scales: the kernel's exponent bits agree with frexp's power of two") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> fraction(0.5f, 1.f);
  std::uniform_int_distribution<int> exponent(-140, 127);
  for (int i = 0; i < 100000; ++i) {
    const float s = std::ldexp(fraction(rng), exponent(rng));
    const float floored = std::max(s, 1e-10f);
    int e = 0;
    const float f = std::frexp(floored, &e);
    const float expected = f == 0.5f ? floored : std::ldexp(1.f, e);
    REQUIRE(kiln::quant::ue8m0_scale(s) == expected);
  }
  CHECK(kiln::quant::ue8m0_scale(1.f) == 1.f);
  CHECK(kiln::quant::ue8m0_scale(1.0000001f) == 2.f);
  CHECK(kiln::quant::ue8m0_exponent(0.f) == 127 - 33);  // 1e-10 rounds up to 2^-33
  CHECK(std::isinf(kiln::quant::ue8m0_scale(INFINITY)));
}

TEST_CASE("UE8M0 scales divide exactly by their reciprocal: x * (1/s) is x / s, zero signs included") {
  // The family kernel divides by a UE8M0 scale with one product (kiln::fp8::group_ratio): every
  // scale ue8m0_scale gives below infinity, 2^-33 to 2^127, against true division over random
  // floats of every magnitude, the subnormals and the signed zeros.
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  std::vector<float> xs{0.f, -0.f, 1e-45f, -1e-45f, 1.17549435e-38f, 3.4028235e38f, -3.4028235e38f};
  for (int i = 0; i < 4000; ++i) {
    std::uint32_t u = any_bits(rng);
    if ((u & 0x7f800000u) == 0x7f800000u) u &= 0xbfffffffu;  // no NaN or infinity: the scale is finite only when |x| is
    float x;
    std::memcpy(&x, &u, sizeof x);
    xs.push_back(x);
  }
  std::uint64_t pairs = 0;
  for (unsigned e = 127 - 33; e <= 254; ++e) {
    const float scale = kiln::quant::ue8m0_scale(std::ldexp(1.f, static_cast<int>(e) - 127));
    REQUIRE(scale == std::ldexp(1.f, static_cast<int>(e) - 127));
    const float recip = 1.f / scale;
    for (const float x : xs) {
      const float product = x * recip, quotient = x / scale;
      ++pairs;
      REQUIRE(std::memcmp(&product, &quotient, sizeof product) == 0);
    }
  }
  CHECK(pairs > 500'000);
}

TEST_CASE("int8: scale absmax/127, truncation toward zero, NaN to -128") {
  QuantVariant v;
  v.input = QuantInput::fp32;
  v.group = 32;
  v.output = QuantOutput::int8;
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i + 1) * (i % 2 ? -1.f : 1.f);  // 1, -2, 3, ... -32
  x[5] = NAN;
  std::vector<std::uint8_t> q(32);
  float scale = 0;
  group_quant_reference(v, x.data(), 1, 32, 0, 1e-10f, q.data(), &scale);
  CHECK(scale == 32.f / 127.f);
  CHECK(static_cast<std::int8_t>(q[0]) == 3);     // 1 / (32/127) = 3.97
  CHECK(static_cast<std::int8_t>(q[1]) == -7);    // -2 * 3.97 = -7.94
  CHECK(static_cast<std::int8_t>(q[31]) == -127); // the group max
  CHECK(static_cast<std::int8_t>(q[5]) == -128);
}

TEST_CASE("column-major, TMA-aligned and packed scales land where DeepGEMM reads them") {
  const std::uint64_t m = 5, k = 6 * 32;
  std::vector<float> x(m * k);
  for (std::uint64_t r = 0; r < m; ++r)
    for (std::uint64_t g = 0; g < 6; ++g)
      for (int e = 0; e < 32; ++e) x[r * k + g * 32 + e] = (e == 0 ? 448.f : 1.f) * std::ldexp(1.f, static_cast<int>(r + g));
  QuantVariant v;
  v.input = QuantInput::fp32;
  v.group = 32;
  std::vector<std::uint8_t> q(m * k);
  v.scales = QuantScales::column_major;
  std::vector<float> col(6 * m);
  group_quant_reference(v, x.data(), m, k, 0, 1e-10f, q.data(), col.data());
  CHECK(col[3 * m + 2] == std::ldexp(1.f, 5));  // group 3 of row 2: absmax 448 * 2^5
  v.scales = QuantScales::column_major_tma;
  std::vector<float> tma(6 * 8, -1.f);
  group_quant_reference(v, x.data(), m, k, 0, 1e-10f, q.data(), tma.data());
  CHECK(tma[3 * 8 + 2] == std::ldexp(1.f, 5));
  CHECK(tma[3 * 8 + 6] == -1.f);  // padding rows are left alone
  v.scales = QuantScales::ue8m0_packed;
  v.ue8m0 = true;
  std::vector<std::uint8_t> packed(2 * 8 * 4, 0xA5);
  group_quant_reference(v, x.data(), m, k, 0, 1e-10f, q.data(), packed.data());
  // Word (g / 4) * 8 + r, byte g % 4: the exponent 127 + r + g.
  CHECK(packed[((1 * 8) + 2) * 4 + 1] == 127 + 2 + 5);
  CHECK(packed[((1 * 8) + 2) * 4 + 2] == 0);  // group 6 does not exist: zero
  CHECK(packed[((0 * 8) + 6) * 4 + 0] == 0);  // row 6 is padding: zero
}

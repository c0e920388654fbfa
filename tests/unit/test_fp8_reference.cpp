// The CPU reference of the FP8 quantizers, the kernels' software e4m3 conversion checked against
// it, and a host walk of the Hopper twin's work split.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "jit/registry.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "ops/fp8_reference.hpp"

// Why a kernel header in a CPU test: its software conversion (the path of GPUs before sm_89) is
// plain integer code, and this is the one place it can be checked against the reference.
#include "../kernels_src/common/fp8_e4m3.cuh"

using namespace kiln;
using namespace kiln::ops;

namespace {

constexpr std::uint32_t GROUP = FP8_QUANT_GROUP;
constexpr std::uint16_t BF16_NAN = 0x7fc0;
constexpr std::uint16_t BF16_NEG_NAN = 0xffc0;
constexpr std::uint16_t BF16_INF = 0x7f80;
constexpr std::uint16_t BF16_NEG_INF = 0xff80;
constexpr std::uint16_t BF16_NEG_ZERO = 0x8000;

std::uint32_t bits(float value) {
  std::uint32_t b;
  std::memcpy(&b, &value, sizeof b);
  return b;
}

float from_bits(std::uint32_t b) {
  float value;
  std::memcpy(&value, &b, sizeof value);
  return value;
}

std::uint16_t bf16(float value) { return float_to_bf16(value); }

struct Quantized {
  std::vector<std::uint8_t> q;
  std::vector<float> scales;
};

Quantized quantize(const std::vector<std::uint16_t>& x, std::uint32_t m, std::uint32_t k) {
  Quantized out{std::vector<std::uint8_t>(std::size_t{m} * k), std::vector<float>(std::size_t{m} * (k / GROUP))};
  fp8_quantize_reference(x.data(), m, k, out.q.data(), out.scales.data());
  return out;
}

// The rule fp8_reference.hpp states, spelled out: e4m3 of x / scale clamped to +-448.
std::uint8_t expected_code(float x, float scale) {
  return float_to_e4m3(std::fmin(std::fmax(x / scale, -448.0f), 448.0f));
}

}  // namespace

TEST_CASE("bf16: decode is exact, encode rounds to nearest even") {
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(bf16_to_float(0xc040) == -3.0f);
  CHECK(std::isinf(bf16_to_float(BF16_INF)));
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto code = static_cast<std::uint16_t>(b);
    const float value = bf16_to_float(code);
    if (std::isnan(value))
      CHECK(std::isnan(bf16_to_float(float_to_bf16(value))));
    else
      CHECK(float_to_bf16(value) == code);
  }
  CHECK(float_to_bf16(from_bits(0x3f808000)) == 0x3f80);  // halfway, even below
  CHECK(float_to_bf16(from_bits(0x3f818000)) == 0x3f82);  // halfway, even above
  CHECK(float_to_bf16(from_bits(0x3f808001)) == 0x3f81);
  CHECK(float_to_bf16(from_bits(0x3f807fff)) == 0x3f80);
  CHECK(float_to_bf16(std::numeric_limits<float>::max()) == BF16_INF);
  CHECK(float_to_bf16(-0.0f) == BF16_NEG_ZERO);
}

TEST_CASE("e4m3 decode: bias 7, subnormals in steps of 2^-9, 448 max, NaN at 0x7F and 0xFF") {
  CHECK(e4m3_to_float(0x00) == 0.0f);
  CHECK(std::signbit(e4m3_to_float(0x80)));
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  CHECK(e4m3_to_float(0x07) == std::ldexp(7.0f, -9));
  CHECK(e4m3_to_float(0x08) == std::ldexp(1.0f, -6));
  CHECK(e4m3_to_float(0x38) == 1.0f);
  CHECK(e4m3_to_float(0x3f) == 1.875f);
  CHECK(e4m3_to_float(0x42) == 2.5f);
  CHECK(e4m3_to_float(0x7e) == 448.0f);
  CHECK(e4m3_to_float(0xfe) == -448.0f);
  CHECK(std::isnan(e4m3_to_float(0x7f)));
  CHECK(std::isnan(e4m3_to_float(0xff)));
  for (std::uint32_t c = 1; c <= 0x7e; ++c) CHECK(e4m3_to_float(static_cast<std::uint8_t>(c)) > e4m3_to_float(static_cast<std::uint8_t>(c - 1)));
}

TEST_CASE("e4m3 encode: every code round-trips") {
  for (std::uint32_t c = 0; c <= 0xff; ++c) {
    if (c == 0x7f || c == 0xff) continue;
    CAPTURE(c);
    CHECK(float_to_e4m3(e4m3_to_float(static_cast<std::uint8_t>(c))) == c);
  }
}

TEST_CASE("e4m3 encode: halfway values go to the even code, others to the nearest") {
  for (std::uint32_t c = 0; c < 0x7e; ++c) {
    const float lo = e4m3_to_float(static_cast<std::uint8_t>(c));
    const float hi = e4m3_to_float(static_cast<std::uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;  // exact: a few bits wider than e4m3
    REQUIRE(mid - lo == hi - mid);
    const std::uint32_t even = (c % 2 == 0) ? c : c + 1;
    CAPTURE(c, mid);
    CHECK(float_to_e4m3(mid) == even);
    CHECK(float_to_e4m3(-mid) == (even | 0x80));
    CHECK(float_to_e4m3(std::nextafter(mid, 0.0f)) == c);
    CHECK(float_to_e4m3(std::nextafter(mid, 1000.0f)) == c + 1);
  }
}

TEST_CASE("e4m3 encode: saturation, subnormals, signed zero and NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {448.0f, 449.0f, 463.99f, 464.0f, 480.0f, 1e30f, std::numeric_limits<float>::max(), inf}) {
    CAPTURE(v);
    CHECK(float_to_e4m3(v) == 0x7e);
    CHECK(float_to_e4m3(-v) == 0xfe);
  }
  CHECK(float_to_e4m3(std::nanf("")) == 0x7f);
  CHECK(float_to_e4m3(std::ldexp(1.0f, -9)) == 0x01);
  CHECK(float_to_e4m3(std::ldexp(1.0f, -10)) == 0x00);                       // tie 0 / 1
  CHECK(float_to_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)) == 0x01);
  CHECK(float_to_e4m3(std::ldexp(3.0f, -10)) == 0x02);                       // tie 1 / 2
  CHECK(float_to_e4m3(std::ldexp(15.0f, -10)) == 0x08);                      // tie 7 / 2^-6
  CHECK(float_to_e4m3(std::ldexp(13.0f, -10)) == 0x06);                      // tie 6 / 7
  CHECK(float_to_e4m3(std::numeric_limits<float>::denorm_min()) == 0x00);
  CHECK(float_to_e4m3(-std::numeric_limits<float>::denorm_min()) == 0x80);
  CHECK(float_to_e4m3(0.0f) == 0x00);
  CHECK(float_to_e4m3(-0.0f) == 0x80);
}

TEST_CASE("the kernels' software e4m3 conversion equals the reference's nearest-code search") {
  auto check = [](std::uint32_t b) {
    const unsigned soft = kiln::fp8::e4m3_from_bits(b);
    const unsigned ref = float_to_e4m3(from_bits(b));
    if (soft != ref) FAIL_CHECK("float bits " << b << ": kernel " << soft << ", reference " << ref);
  };
  // Around every code and every midpoint, both signs, where rounding can go wrong.
  for (std::uint32_t c = 0; c <= 0x7e; ++c) {
    const float lo = e4m3_to_float(static_cast<std::uint8_t>(c));
    const float hi = c < 0x7e ? e4m3_to_float(static_cast<std::uint8_t>(c + 1)) : 464.0f;
    for (float centre : {lo, (lo + hi) / 2})
      for (std::int32_t d = -64; d <= 64; ++d) {
        const std::int64_t b = std::int64_t{bits(centre)} + d;
        if (b < 0) continue;
        check(static_cast<std::uint32_t>(b));
        check(static_cast<std::uint32_t>(b) | 0x80000000u);
      }
  }
  // Spread over all 2^32 patterns (NaN, infinities, huge and subnormal floats included): a Weyl
  // sequence visits every residue class evenly.
  for (std::uint32_t i = 0, b = 0; i < (1u << 22); ++i, b += 0x9e3779b1u) check(b);
}

TEST_CASE("quantize: scale is absmax / 448, q is e4m3(x / scale)") {
  std::vector<std::uint16_t> x(GROUP, 0);
  x[0] = bf16(448.0f);
  x[1] = bf16(1.0f);
  x[2] = bf16(-2.5f);
  x[3] = bf16(std::ldexp(1.0f, -9));
  x[4] = bf16(-448.0f);
  x[5] = bf16(3.3f);
  const auto out = quantize(x, 1, GROUP);
  CHECK(out.scales[0] == 1.0f);
  CHECK(out.q[0] == 0x7e);
  CHECK(out.q[1] == 0x38);
  CHECK(out.q[2] == 0xc2);
  CHECK(out.q[3] == 0x01);
  CHECK(out.q[4] == 0xfe);
  CHECK(out.q[5] == 0x45);  // bf16(3.3) = 3.296875, between 3.25 (0x45) and 3.5
  CHECK(out.q[6] == 0x00);

  x[0] = bf16(-5.0f);  // the absmax may be negative
  x[4] = 0;
  const auto scaled = quantize(x, 1, GROUP);
  CHECK(bits(scaled.scales[0]) == bits(5.0f / 448.0f));
  CHECK(scaled.q[0] == 0xfe);
  for (std::uint32_t i = 0; i < GROUP; ++i) {
    CAPTURE(i);
    CHECK(scaled.q[i] == expected_code(bf16_to_float(x[i]), scaled.scales[0]));
  }
  CHECK(scaled.q[5] == 0x79);  // 3.296875 / (5 / 448) = 295.4: nearest 288 (0x79), step 32 there
}

TEST_CASE("quantize: each (row, group) has its own scale at scales[row * K/128 + group]") {
  const std::uint32_t m = 3, k = 3 * GROUP;
  std::vector<std::uint16_t> x(m * k, 0);
  for (std::uint32_t r = 0; r < m; ++r)
    for (std::uint32_t g = 0; g < k / GROUP; ++g) x[r * k + g * GROUP + 5] = bf16(448.0f * (r + 1) * (g + 1));
  const auto out = quantize(x, m, k);
  for (std::uint32_t r = 0; r < m; ++r)
    for (std::uint32_t g = 0; g < k / GROUP; ++g) {
      CAPTURE(r, g);
      CHECK(out.scales[r * (k / GROUP) + g] == static_cast<float>((r + 1) * (g + 1)));
      for (std::uint32_t i = 0; i < GROUP; ++i) CHECK(out.q[r * k + g * GROUP + i] == (i == 5 ? 0x7e : 0x00));
    }
}

TEST_CASE("quantize: the absmax element always lands on +-448, for every bf16 absmax") {
  std::vector<std::uint16_t> x;
  std::vector<std::uint16_t> absmax;
  for (std::uint32_t b = 0x0001; b < BF16_INF; ++b) {
    if (bf16_to_float(static_cast<std::uint16_t>(b)) < FP8_QUANT_EPS) continue;
    absmax.push_back(static_cast<std::uint16_t>(b));
    std::vector<std::uint16_t> group(GROUP, 0);
    group[0] = static_cast<std::uint16_t>(b);
    group[1] = static_cast<std::uint16_t>(b | 0x8000);
    x.insert(x.end(), group.begin(), group.end());
  }
  const auto m = static_cast<std::uint32_t>(absmax.size());
  const auto out = quantize(x, m, GROUP);
  for (std::uint32_t r = 0; r < m; ++r) {
    CAPTURE(absmax[r]);
    CHECK(bits(out.scales[r]) == bits(bf16_to_float(absmax[r]) / 448.0f));
    CHECK(out.q[r * GROUP] == 0x7e);
    CHECK(out.q[r * GROUP + 1] == 0xfe);
  }
}

TEST_CASE("quantize: NaN never raises absmax and becomes -448") {
  std::vector<std::uint16_t> x(GROUP);
  for (std::uint32_t i = 0; i < GROUP; ++i) x[i] = bf16(0.01f * static_cast<float>(i) - 0.5f);
  const auto clean = quantize(x, 1, GROUP);
  x[7] = BF16_NAN;
  x[9] = BF16_NEG_NAN;
  const auto dirty = quantize(x, 1, GROUP);
  CHECK(bits(dirty.scales[0]) == bits(clean.scales[0]));
  CHECK(dirty.q[7] == 0xfe);
  CHECK(dirty.q[9] == 0xfe);
  for (std::uint32_t i = 0; i < GROUP; ++i)
    if (i != 7 && i != 9) CHECK(dirty.q[i] == clean.q[i]);

  const auto all_nan = quantize(std::vector<std::uint16_t>(GROUP, BF16_NAN), 1, GROUP);
  CHECK(bits(all_nan.scales[0]) == bits(FP8_QUANT_EPS / 448.0f));
  for (auto code : all_nan.q) CHECK(code == 0xfe);
}

TEST_CASE("quantize: an infinite element makes the scale infinite, finite elements +-0, inf and NaN -448") {
  std::vector<std::uint16_t> x(GROUP, bf16(3.0f));
  x[0] = BF16_INF;
  x[1] = BF16_NEG_INF;
  x[2] = BF16_NAN;
  x[3] = bf16(1.0f);
  x[4] = bf16(-1.0f);
  x[5] = 0;
  x[6] = BF16_NEG_ZERO;
  const auto out = quantize(x, 1, GROUP);
  CHECK(std::isinf(out.scales[0]));
  CHECK(out.scales[0] > 0);
  CHECK(out.q[0] == 0xfe);  // inf / inf is NaN
  CHECK(out.q[1] == 0xfe);
  CHECK(out.q[2] == 0xfe);
  CHECK(out.q[3] == 0x00);
  CHECK(out.q[4] == 0x80);  // -1 / inf = -0
  CHECK(out.q[5] == 0x00);
  CHECK(out.q[6] == 0x80);
  for (std::uint32_t i = 7; i < GROUP; ++i) CHECK(out.q[i] == 0x00);
}

TEST_CASE("quantize: groups below eps use scale eps / 448") {
  const auto zeros = quantize(std::vector<std::uint16_t>(GROUP, 0), 1, GROUP);
  CHECK(bits(zeros.scales[0]) == bits(1e-10f / 448.0f));
  for (auto code : zeros.q) CHECK(code == 0x00);

  const auto negative_zeros = quantize(std::vector<std::uint16_t>(GROUP, BF16_NEG_ZERO), 1, GROUP);
  CHECK(bits(negative_zeros.scales[0]) == bits(1e-10f / 448.0f));
  for (auto code : negative_zeros.q) CHECK(code == 0x80);

  // bf16(1e-12) = 9.9976e-13: 4.479 x the scale, nearest code 4.5 (0x49), not 448.
  const auto tiny = quantize(std::vector<std::uint16_t>(GROUP, bf16(1e-12f)), 1, GROUP);
  CHECK(bits(tiny.scales[0]) == bits(1e-10f / 448.0f));
  for (auto code : tiny.q) CHECK(code == 0x49);
}

TEST_CASE("quantize: true division, where x * (1 / scale) gives another byte") {
  // Find a bf16 pair (absmax, x) whose quotient and reciprocal product round to different codes.
  bool found = false;
  std::uint16_t absmax_bits = 0, x_bits = 0;
  for (std::uint32_t a = 0x3f80; a < 0x4000 && !found; ++a) {
    const float scale = bf16_to_float(static_cast<std::uint16_t>(a)) / 448.0f;
    for (std::uint32_t b = 0x3000; b <= a && !found; ++b) {
      const float v = bf16_to_float(static_cast<std::uint16_t>(b));
      const float by_reciprocal = std::fmin(std::fmax(v * (1.0f / scale), -448.0f), 448.0f);
      if (float_to_e4m3(by_reciprocal) != expected_code(v, scale)) {
        found = true;
        absmax_bits = static_cast<std::uint16_t>(a);
        x_bits = static_cast<std::uint16_t>(b);
      }
    }
  }
  REQUIRE(found);
  std::vector<std::uint16_t> x(GROUP, 0);
  x[0] = absmax_bits;
  x[1] = x_bits;
  const auto out = quantize(x, 1, GROUP);
  const float scale = bf16_to_float(absmax_bits) / 448.0f;
  const float v = bf16_to_float(x_bits);
  CAPTURE(absmax_bits, x_bits);
  CHECK(bits(out.scales[0]) == bits(scale));
  CHECK(out.q[1] == float_to_e4m3(v / scale));
  CHECK(out.q[1] != float_to_e4m3(v * (1.0f / scale)));
}

namespace {

// kiln::fp8::ratio_by_reciprocal (fp8_e4m3.cuh), clamped to +-448 as e4m3x2_group and the
// conversion do, in host arithmetic: 1.0f / scale is __frcp_rn, `*` __fmul_rn, std::fma
// __fmaf_rn (x86-64's baseline has no fma instruction, so the compiler cannot fuse the product
// either).
float ratio_by_reciprocal(float x, float scale) {
  const float recip = 1.0f / scale;
  const float first = x * recip;
  const float negated_residual = std::fma(first, scale, -x);
  return std::fmin(std::fmax(std::fma(negated_residual, -recip, first), -448.0f), 448.0f);
}

// Pairs (absmax, x) whose codes differ between the twin's division and true division; x walks
// every bf16 of magnitude <= absmax in steps of `stride` from `offset`.
std::uint64_t reciprocal_mismatches(std::uint32_t absmax_bits, std::uint32_t stride, std::uint32_t offset,
                                    std::uint64_t& pairs, float eps = 1e-10f) {
  const float absmax = bf16_to_float(static_cast<std::uint16_t>(absmax_bits));
  const float scale = std::fmax(absmax, eps) / 448.0f;
  std::uint64_t bad = 0;
  for (std::uint32_t magnitude = offset % stride; magnitude <= absmax_bits; magnitude += stride)
    for (const std::uint32_t sign : {0u, 0x8000u}) {
      const float v = bf16_to_float(static_cast<std::uint16_t>(sign | magnitude));
      ++pairs;
      if (kiln::fp8::e4m3_from_bits(bits(ratio_by_reciprocal(v, scale))) != expected_code(v, scale)) ++bad;
    }
  return bad;
}

}  // namespace

TEST_CASE("the twin's reciprocal-and-fma division gives true division's code for every group") {
  // test_gpu_fp8 and bench/explore/twin_geometry.cu check all ~2^31 (absmax, x) pairs on the GPU;
  // here every finite absmax with a 1/61 sample of x, and every x for the edges: zero, denormals,
  // eps, 1, the largest.
  std::uint64_t pairs = 0, bad = 0;
  for (std::uint32_t a = 0; a < BF16_INF; ++a) bad += reciprocal_mismatches(a, 61, a, pairs);
  for (const std::uint32_t a : {0x0000u, 0x0001u, 0x007fu, 0x0080u, 0x2edbu, 0x2edcu, 0x3f80u, 0x43e0u, 0x7f7fu})
    bad += reciprocal_mismatches(a, 1, 0, pairs);
  CAPTURE(pairs);
  CHECK(pairs > 17'000'000);
  CHECK(bad == 0);
  // The sign of a quotient that underflows is kept: -tiny / huge scale is e4m3 -0 (0x80), and so
  // is the sign of a zero x (the order of the correction's operands decides it; no copysign).
  CHECK(kiln::fp8::e4m3_from_bits(bits(ratio_by_reciprocal(-1e-38f, 3e38f / 448.0f))) == 0x80);
  CHECK(kiln::fp8::e4m3_from_bits(bits(ratio_by_reciprocal(-0.0f, 1.0f / 448.0f))) == 0x80);
  CHECK(kiln::fp8::e4m3_from_bits(bits(ratio_by_reciprocal(0.0f, 1.0f / 448.0f))) == 0x00);
}

TEST_CASE("the reciprocal division's floor: true division's codes from RECIPROCAL_MIN_SCALE up, with eps 0") {
  // The family kernel takes any eps >= 0, so its scales reach 0. Every group max whose scale is
  // below 2^-40 (the range the default eps never reaches), with a 1/7 sample of x.
  const std::uint32_t below_2_to_minus_40 = 0x2f80;  // bf16 448 * 2^-40 is about 2^-31.2
  std::uint64_t pairs = 0, bad_from_floor = 0, bad_below_floor = 0;
  for (std::uint32_t a = 1; a < below_2_to_minus_40; ++a) {
    const std::uint64_t bad = reciprocal_mismatches(a, 7, a, pairs, 0.0f);
    (bf16_to_float(static_cast<std::uint16_t>(a)) / 448.0f >= kiln::fp8::RECIPROCAL_MIN_SCALE ? bad_from_floor
                                                                                            : bad_below_floor) += bad;
  }
  CAPTURE(pairs, bad_below_floor);
  CHECK(pairs > 5'000'000);
  CHECK(bad_from_floor == 0);
  CHECK(bad_below_floor > 0);  // why the floor exists: the kernels divide element by element there
}

TEST_CASE("quantize: bad arguments name the argument") {
  std::vector<std::uint16_t> x(GROUP, 0);
  std::vector<std::uint8_t> q(GROUP);
  std::vector<float> s(1);
  CHECK_THROWS_WITH(fp8_quantize_reference(x.data(), 1, 100, q.data(), s.data()), Catch::Contains("'k'"));
  CHECK_THROWS_AS(fp8_quantize_reference(x.data(), 1, 100, q.data(), s.data()), kiln::Error);
  CHECK_THROWS_WITH(fp8_quantize_reference(nullptr, 1, GROUP, q.data(), s.data()), Catch::Contains("'x'"));
  CHECK_THROWS_WITH(fp8_quantize_reference(x.data(), 1, GROUP, nullptr, s.data()), Catch::Contains("'q'"));
  CHECK_THROWS_WITH(fp8_quantize_reference(x.data(), 1, GROUP, q.data(), nullptr), Catch::Contains("'scales'"));
  CHECK_NOTHROW(fp8_quantize_reference(nullptr, 0, GROUP, nullptr, nullptr));
  CHECK_NOTHROW(fp8_quantize_reference(nullptr, 5, 0, nullptr, nullptr));
}

TEST_CASE("compare_fp8_outputs names the first difference, scales before bytes") {
  const std::uint32_t m = 2, k = 2 * GROUP;
  std::vector<std::uint16_t> x(m * k);
  for (std::uint32_t i = 0; i < m * k; ++i) x[i] = bf16(std::sin(static_cast<float>(i)));
  const auto expected = quantize(x, m, k);
  auto actual = expected;
  CHECK_FALSE(compare_fp8_outputs(expected.q.data(), expected.scales.data(), actual.q.data(), actual.scales.data(), m, k));

  actual.q[k + 130] ^= 1;
  auto first = compare_fp8_outputs(expected.q.data(), expected.scales.data(), actual.q.data(), actual.scales.data(), m, k);
  REQUIRE(first);
  CHECK(first->output == Fp8Output::q);
  CHECK(first->index == k + 130);
  CHECK(first->row == 1);
  CHECK(first->column == 130);
  CHECK(first->expected == expected.q[k + 130]);
  CHECK(first->actual == actual.q[k + 130]);
  CHECK(first->mismatches == 1);
  CHECK_THAT(to_string(*first), Catch::StartsWith("q[1, 130] (index 386): expected 0x") &&
                                    Catch::EndsWith("; 1 mismatch in all"));

  actual.scales[3] = std::nextafter(actual.scales[3], 1.0f);
  first = compare_fp8_outputs(expected.q.data(), expected.scales.data(), actual.q.data(), actual.scales.data(), m, k);
  REQUIRE(first);
  CHECK(first->output == Fp8Output::scale);
  CHECK(first->index == 3);
  CHECK(first->row == 1);
  CHECK(first->column == 1);
  CHECK(first->expected == bits(expected.scales[3]));
  CHECK(first->actual == bits(actual.scales[3]));
  CHECK(first->mismatches == 2);
  CHECK_THAT(to_string(*first), Catch::StartsWith("scale[1, 1] (index 3)") && Catch::EndsWith("2 mismatches in all"));

  CHECK_THROWS_WITH(compare_fp8_outputs(expected.q.data(), expected.scales.data(), nullptr, actual.scales.data(), m, k),
                    Catch::Contains("'actual_q'"));
  CHECK_THROWS_WITH(compare_fp8_outputs(expected.q.data(), expected.scales.data(), actual.q.data(), actual.scales.data(), m, 130),
                    Catch::Contains("'k'"));
}

namespace {

// The Hopper twin's work split, walked on the host as per_token_group_quant_fp8_hopper walks it
// (kernels_src/hopper/fp8_act_quant_hopper.cu): slot `sub` of CTA `cta` takes groups
// fp8_quant_hopper_group(cta, sub, grid_x, pass) for pass = 0, 1, ... below m * L; thread tid is
// slot / lane of fp8_quant_hopper_lane and writes its run of 16 elements; lane 0 writes the scale.
// Keep this loop and the kernel's in step.
constexpr std::uint32_t TWIN_THREADS = 128;

struct TwinWrites {
  std::vector<std::uint8_t> q;       // writes per element of [m, k]
  std::vector<std::uint8_t> scales;  // writes per group of [m, k/128]
};

TwinWrites walk_twin(std::uint32_t m, std::uint32_t k, std::uint32_t grid_x) {
  const std::uint64_t groups = std::uint64_t{m} * (k / GROUP);
  TwinWrites writes{std::vector<std::uint8_t>(std::size_t{m} * k), std::vector<std::uint8_t>(groups)};
  for (std::uint32_t cta = 0; cta < grid_x; ++cta)
    for (std::uint32_t tid = 0; tid < TWIN_THREADS; ++tid) {
      const auto lane = fp8_quant_hopper_lane(tid);
      for (std::uint64_t pass = 0;; ++pass) {
        const std::uint64_t g = fp8_quant_hopper_group(cta, lane.sub, grid_x, pass);
        if (g >= groups) break;
        for (std::uint32_t e = lane.start; e < lane.start + FP8_QUANT_HOPPER_RUN; ++e) ++writes.q[g * GROUP + e];
        if (lane.start == 0) ++writes.scales[g];
      }
    }
  return writes;
}

// Index of the first entry not written exactly once, or -1.
std::int64_t first_not_once(const std::vector<std::uint8_t>& writes) {
  for (std::size_t i = 0; i < writes.size(); ++i)
    if (writes[i] != 1) return static_cast<std::int64_t>(i);
  return -1;
}

}  // namespace

TEST_CASE("the twin's host walk is the kernel's loop") {
  const auto* twin = find_module(FP8_QUANT_HOPPER_MODULE);
  REQUIRE(twin != nullptr);
  const std::string_view text = twin->text;
  CHECK(text.find("constexpr unsigned HQ_LANES = " + std::to_string(FP8_QUANT_HOPPER_LANES) + ";") != std::string_view::npos);
  CHECK(text.find("constexpr unsigned HQ_RUN = HQ_VECS * HQ_VEC;") != std::string_view::npos);
  CHECK(text.find("constexpr unsigned HQ_VECS = 2;") != std::string_view::npos);
  CHECK(text.find("constexpr unsigned HQ_VEC = 8;") != std::string_view::npos);
  CHECK(FP8_QUANT_HOPPER_RUN == 2 * 8);
  CHECK(text.find("for (unsigned long long g = static_cast<unsigned long long>(blockIdx.x) * HQ_GROUPS_PER_CTA + sub; g < groups;") !=
        std::string_view::npos);
  CHECK(text.find("const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * HQ_GROUPS_PER_CTA;") !=
        std::string_view::npos);
  CHECK(text.find("const unsigned long long at = g * kiln::fp8::GROUP + lane * HQ_RUN;") != std::string_view::npos);
  CHECK(text.find("lane == 0 ? scales + g : nullptr") != std::string_view::npos);
}

TEST_CASE("the twin's work split writes every element and scale once, for any grid X") {
  for (std::uint32_t m : {1u, 2u, 3u})
    for (std::uint32_t groups = 1; groups <= 40; ++groups) {
      const std::uint32_t k = groups * GROUP;
      const std::uint32_t full = fp8_quant_grid(true, m, k)[0];
      // kiln's grid, and smaller ones standing in for a capped grid, whose slots loop.
      for (std::uint32_t grid_x = 1; grid_x <= full; ++grid_x) {
        CAPTURE(m, groups, grid_x);
        const auto writes = walk_twin(m, k, grid_x);
        CHECK(first_not_once(writes.q) == -1);
        CHECK(first_not_once(writes.scales) == -1);
      }
    }
}

TEST_CASE("the twin's work split on kiln's grid at the bench's shapes") {
  for (std::uint32_t groups : {1u, 8u, 9u, 16u, 17u, 40u, 56u, 136u, 144u}) {
    const std::uint32_t k = groups * GROUP;
    for (std::uint32_t m : {1u, 3u, 17u}) {
      const auto grid = fp8_quant_grid(true, m, k);
      CAPTURE(groups, m, grid[0]);
      REQUIRE(grid[1] == 1);
      const auto writes = walk_twin(m, k, grid[0]);
      CHECK(first_not_once(writes.q) == -1);
      CHECK(first_not_once(writes.scales) == -1);
    }
  }
}

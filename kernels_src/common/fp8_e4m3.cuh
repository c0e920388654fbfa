#pragma once
// The numerics both FP8 quantizers share: bf16 unpacking, the group scale, the clamped ratio and
// the e4m3 (OCP E4M3FN: bias 7, no infinity, 0x7F/0xFF NaN, max 448) conversion. Keeping them in
// one header is what makes the two kernels byte-identical.
//
// No toolkit header is included: NVRTC receives this file by name and compiles with no include
// path, so only compiler builtins are used.
//
// The software conversion is plain integer code so the CPU tests (tests/test_fp8_reference.cpp)
// can compile it and check it against the reference's independent nearest-code search.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KILN_FP8_FN __device__ __forceinline__
#else
#define KILN_FP8_FN inline
#endif

namespace kiln::fp8 {

constexpr unsigned GROUP = 128;       // elements per group, one fp32 scale each
constexpr float E4M3_MAX = 448.0f;
constexpr float ABSMAX_EPS = 1e-10f;  // vLLM's eps: an all-zero group gets a finite scale

// The smallest scale ratio_by_reciprocal divides by. Why a floor: below about 2^-113 its residual
// underflows and codes differ from true division (every bf16 group max with eps 0, checked on the
// CPU by tests/test_fp8_reference.cpp), and a scale of 0 (eps 0, an all-zero group) has an
// infinite reciprocal that made every code NaN. Why 2^-64: far above where that starts, and far
// below any scale of the default eps (1e-10 / 448, about 2^-42) or of UE8M0 (at least 2^-33).
constexpr float RECIPROCAL_MIN_SCALE = 0x1p-64f;

static_assert(ABSMAX_EPS / E4M3_MAX >= RECIPROCAL_MIN_SCALE, "group_divisor skips the floor test");

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
KILN_FP8_FN float float_of_bits(unsigned u) { return __uint_as_float(u); }
KILN_FP8_FN unsigned bits_of_float(float f) { return __float_as_uint(f); }
KILN_FP8_FN float add_rn(float a, float b) { return __fadd_rn(a, b); }
KILN_FP8_FN float min_f(float a, float b) { return fminf(a, b); }
KILN_FP8_FN float max_f(float a, float b) { return fmaxf(a, b); }
KILN_FP8_FN float abs_f(float a) { return fabsf(a); }
#else
KILN_FP8_FN float float_of_bits(unsigned u) { return __builtin_bit_cast(float, u); }
KILN_FP8_FN unsigned bits_of_float(float f) { return __builtin_bit_cast(unsigned, f); }
KILN_FP8_FN float add_rn(float a, float b) { return a + b; }
KILN_FP8_FN float min_f(float a, float b) { return __builtin_fminf(a, b); }
KILN_FP8_FN float max_f(float a, float b) { return __builtin_fmaxf(a, b); }
KILN_FP8_FN float abs_f(float a) { return __builtin_fabsf(a); }
#endif

// The e4m3 code of |v| without its sign, v not NaN, round to nearest even, saturating at 448
// (infinity included). One float addition rounds: |v| plus 2^(e + 20), e the exponent of |v| (at
// least -6, where e4m3 turns subnormal), keeps exactly e4m3's 3 fraction bits (2^-9 steps below
// 2^-6), so the sum's low bits minus the addend's are the rounded mantissa, a carry into the next
// binade included. Why float min/max: |v| and the clamps are operand modifiers of one instruction
// each, where integer masks and compares took two more per element; and no branch per range,
// which cost about twice the instructions.
KILN_FP8_FN unsigned e4m3_magnitude_code(float v) {
  constexpr unsigned SMALLEST_NORMAL = 0x3c800000u;  // 2^-6
  const float a = min_f(abs_f(v), E4M3_MAX);
  const unsigned binade = bits_of_float(max_f(a, float_of_bits(SMALLEST_NORMAL))) & 0x7f800000u;
  const unsigned addend = binade + (20u << 23);
  const unsigned sum = bits_of_float(add_rn(a, float_of_bits(addend)));
  return sum - addend + ((binade - SMALLEST_NORMAL) >> 20);
}

// e4m3 of the float with bits `u`, not NaN (e4m3_magnitude_code with the sign of u).
KILN_FP8_FN unsigned e4m3_from_non_nan_bits(unsigned u) {
  return ((u >> 24) & 0x80u) | e4m3_magnitude_code(float_of_bits(u));
}

// e4m3 of the float with bits `u` (OCP E4M3FN), as `cvt.rn.satfinite.e4m3x2.f32` converts it: round
// to nearest even, |x| >= 448 (infinity included) gives 448, NaN gives 0x7F.
KILN_FP8_FN unsigned e4m3_from_bits(unsigned u) {
  return (u & 0x7fffffffu) > 0x7f800000u ? 0x7fu : e4m3_from_non_nan_bits(u);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

KILN_FP8_FN float bf16_to_float(unsigned short bits) { return __uint_as_float(static_cast<unsigned>(bits) << 16); }
// The two bf16 packed in one 32-bit word: element 2j in the low half, 2j+1 in the high half.
KILN_FP8_FN float bf16_low(unsigned w) { return __uint_as_float(w << 16); }
KILN_FP8_FN float bf16_high(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

// Two e4m3 codes in one 16-bit value: `lo` in bits 0-7 (the lower address), `hi` in bits 8-15.
// Neither may be NaN (callers clamp NaN to -448 first, or know the group has none).
KILN_FP8_FN unsigned e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned short pair;
  // Why this operand order: the instruction puts its first source in the upper byte.
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(hi), "f"(lo));
  return pair;
#else
  // Why the signs last: one byte permute gathers both from the floats' top bytes and one
  // three-input logic op merges them, where each code took a shift, a mask and an or of its own.
  const unsigned codes = e4m3_magnitude_code(lo) + (e4m3_magnitude_code(hi) << 8);
  return codes | (__byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x0073) & 0x8080u);
#endif
}

KILN_FP8_FN unsigned char e4m3(float v) { return static_cast<unsigned char>(e4m3x2(v, 0.0f)); }

// max(a, b), NaN when either is: max.NaN from sm_80; elsewhere (nvcc's host pass included) the
// same value from fmaxf and a NaN test.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
KILN_FP8_FN float fmax_keeping_nan(float a, float b) {
  float m;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(b));
  return m;
}
#else
KILN_FP8_FN float fmax_keeping_nan(float a, float b) { return a != a || b != b ? a + b : fmaxf(a, b); }
#endif

// max |f[j]| over N values, NaN dropped (fmaxf), for the twin's and the family's slices alike. A
// tree, log2(N) maxima deep, where a loop made a chain of N - 1; fmaxf is associative and
// commutative, so the value is the same. On the H200 the two time the same
// (docs/performance.md, "The twin's geometry").
// KEEP_NAN: NaN when any f[j] is NaN (max.NaN, sm_80 and later), for kernels that skip the
// NaN-to--448 clamp on groups without NaN (e4m3x2_group's NAN_FREE).
template <unsigned N, bool KEEP_NAN = false>
KILN_FP8_FN float max_magnitude(const float* f) {
  if constexpr (N == 1) {
    return fabsf(f[0]);
  } else if constexpr (KEEP_NAN) {
    return fmax_keeping_nan(max_magnitude<N / 2, true>(f), max_magnitude<N - N / 2, true>(f + N / 2));
  } else {
    return fmaxf(max_magnitude<N / 2>(f), max_magnitude<N - N / 2>(f + N / 2));
  }
}

// The group scale from the NaN-free max |x| of the group (fmaxf drops NaN). __fdiv_rn, not `/`:
// IEEE division whatever -prec-div / -use_fast_math say, so the bytes never depend on options.
KILN_FP8_FN float group_scale(float absmax) { return __fdiv_rn(fmaxf(absmax, ABSMAX_EPS), E4M3_MAX); }

// What gets converted: x / scale by true division (x * (1/scale) changes bytes), clamped to
// +-448. fmaxf drops NaN, so a NaN element becomes -448.
KILN_FP8_FN float clamp_ratio(float ratio) { return fminf(fmaxf(ratio, -E4M3_MAX), E4M3_MAX); }

KILN_FP8_FN float clamped_ratio(float x, float scale) { return clamp_ratio(__fdiv_rn(x, scale)); }

// x / scale with the division done once per group: `recip` is __frcp_rn(scale), and one fma
// correction refines x * recip (Markstein). Only for a scale from RECIPROCAL_MIN_SCALE to the
// largest float (GroupDivisor::by_reciprocal; the rest takes clamped_ratio). What it guarantees is the e4m3 code, not the float: over every bf16 pair with
// |x| <= absmax (1.07 G ratios) about 3.5 M floats differ from IEEE x / scale, all of them
// smaller than 2^-71 in magnitude, where both round to a signed e4m3 zero (the smallest e4m3
// subnormal is 2^-9). bench/explore/twin_geometry.cu checks every (absmax, x) pair of bf16 values on the
// GPU (0 codes differ), tests/test_fp8_reference.cpp on the CPU.
// Why the residual is taken negated (first * scale - x) and added back times -recip: the values
// are the same as x - first * scale and residual * recip (round-to-nearest is symmetric), and the
// negations are free operand modifiers, and the zero signs come out right: for x = -0 the last
// step is (+0 * -recip) + -0 = -0, where the plain order gave (+0 * recip) + -0 = +0 and needed a
// copysign, one more instruction per element. A non-zero x never sums to an exact zero (the sum
// is x / scale to within an ulp, and a sum that underflows keeps its sign).
KILN_FP8_FN float ratio_by_reciprocal(float x, float scale, float recip) {
  const float first = __fmul_rn(x, recip);
  const float negated_residual = __fmaf_rn(first, scale, -x);
  return __fmaf_rn(negated_residual, -recip, first);
}

// A group's scale with its reciprocal, for kernels that divide many elements by it.
struct GroupDivisor {
  float scale;
  float recip;
  bool by_reciprocal;  // ratio_by_reciprocal gives true division's codes; else divide each element
};

// Any scale, also one a variant computed its own way (the family kernel's eps, QMAX and UE8M0):
// an infinite one (an infinite absmax) or one below RECIPROCAL_MIN_SCALE (a tiny eps) takes true
// division.
KILN_FP8_FN GroupDivisor divisor_of_scale(float scale) {
  // Why `!= 0`: NVRTC's builtin isfinite returns int, and int -> bool in braces is a narrowing
  // conversion it warns about in every compile (#2361-D).
  return GroupDivisor{scale, __frcp_rn(scale), isfinite(scale) != 0 && scale >= RECIPROCAL_MIN_SCALE};
}
// The seed kernels' divisor. Why only the finite test: their scale is at least ABSMAX_EPS / 448,
// above RECIPROCAL_MIN_SCALE, so the kernels measured for it need no second compare per group.
KILN_FP8_FN GroupDivisor group_divisor(float absmax) {
  const float scale = group_scale(absmax);
  return GroupDivisor{scale, __frcp_rn(scale), isfinite(scale) != 0};
}

// x / scale for one element of a group. EXACT_RECIPROCAL: the scale is a power of two (UE8M0
// scales are), so its reciprocal 2^-e is exact (a normal float, or 2^-127 as a subnormal, for
// every scale from 2^-33 to 2^127) and x * recip is x / scale rounded once: one product instead of
// ratio_by_reciprocal's product and two fma, for the same bits, the zero's sign included.
template <bool EXACT_RECIPROCAL>
KILN_FP8_FN float group_ratio(float x, const GroupDivisor& d) {
  if constexpr (EXACT_RECIPROCAL) {
    return __fmul_rn(x, d.recip);
  } else {
    return ratio_by_reciprocal(x, d.scale, d.recip);
  }
}

// The e4m3 codes of PAIRS element pairs of one group, two per 16-bit value (e4m3x2's order): the
// codes clamped_ratio gives. Why the divisor's test once for the whole slice: tested per pair
// (the group-uniform branch of before) it cost a convergence barrier and two branches per pair in
// the SASS, 4 instructions on 14. Why only the lower clamp: it is what maps NaN to -448 (fmaxf
// drops NaN); cvt.rn.satfinite and e4m3_from_bits saturate the upper end to 448 themselves.
// NAN_FREE: the caller knows no f[j] is NaN, so no clamp at all (with a finite scale every ratio is
// finite, and the conversion saturates both ends).
template <unsigned PAIRS, bool EXACT_RECIPROCAL = false, bool NAN_FREE = false>
KILN_FP8_FN void e4m3x2_group(const float* f, const GroupDivisor& d, unsigned* pairs) {
  const auto nan_to_lowest = [](float ratio) { return NAN_FREE ? ratio : fmaxf(ratio, -E4M3_MAX); };
  if (d.by_reciprocal) {
#pragma unroll
    for (unsigned j = 0; j < PAIRS; ++j)
      pairs[j] = e4m3x2(nan_to_lowest(group_ratio<EXACT_RECIPROCAL>(f[2 * j], d)),
                        nan_to_lowest(group_ratio<EXACT_RECIPROCAL>(f[2 * j + 1], d)));
  } else {
#pragma unroll
    for (unsigned j = 0; j < PAIRS; ++j) pairs[j] = e4m3x2(clamped_ratio(f[2 * j], d.scale), clamped_ratio(f[2 * j + 1], d.scale));
  }
}

#endif

}  // namespace kiln::fp8

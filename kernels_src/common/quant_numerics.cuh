#pragma once
// The numerics of the quantizer family (per_token_group_quant.cu) that are not the e4m3 conversion:
// fp16 unpacking, the fused SiLU-and-mul, UE8M0 scales and the int8 range. The CPU reference
// (src/ops/group_quant_reference.cpp) compiles this same file, so the two agree bit for bit.
//
// Why every float operation goes through KILN_Q_MUL/ADD/FMA: NVRTC contracts `a * b + c` into
// an fma by default and the host compiler does not; spelling each rounding step keeps both sides
// the same sequence of correctly rounded IEEE operations (no fast-math, no flush to zero).

#include "fp8_e4m3.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KILN_Q_MUL(a, b) __fmul_rn((a), (b))
#define KILN_Q_ADD(a, b) __fadd_rn((a), (b))
#define KILN_Q_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define KILN_Q_BITS(f) __float_as_uint(f)
#define KILN_Q_FLOAT(u) __uint_as_float(u)
#else
#include <cmath>
#include <cstring>
namespace kiln::quant::host {
inline unsigned bits(float f) { unsigned u; std::memcpy(&u, &f, sizeof u); return u; }
inline float from_bits(unsigned u) { float f; std::memcpy(&f, &u, sizeof f); return f; }
}  // namespace kiln::quant::host
#define KILN_Q_MUL(a, b) ((a) * (b))
#define KILN_Q_ADD(a, b) ((a) + (b))
#define KILN_Q_FMA(a, b, c) std::fma((a), (b), (c))
#define KILN_Q_BITS(f) ::kiln::quant::host::bits(f)
#define KILN_Q_FLOAT(u) ::kiln::quant::host::from_bits(u)
#endif

namespace kiln::quant {

constexpr float INT8_MAX_CODE = 127.0f;   // scale = absmax / 127, as vLLM's int8 path
constexpr float INT8_MIN_CODE = -128.0f;  // the clamp's lower end (torch.iinfo(int8).min)
constexpr float UE8M0_FLOOR = 1e-10f;     // vLLM clamps the scale to this before rounding it up

// IEEE half (bits) to float, exactly, with integer code (the device uses cvt.f32.f16 instead).
KILN_FP8_FN float fp16_bits_to_float(unsigned short h) {
  const unsigned sign = static_cast<unsigned>(h & 0x8000u) << 16;
  const unsigned exponent = (h >> 10) & 0x1fu;
  unsigned mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return KILN_Q_FLOAT(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return KILN_Q_FLOAT(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return KILN_Q_FLOAT(sign);
  // A subnormal half is mantissa * 2^-24: normalise it into a float.
  unsigned e = 113u;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return KILN_Q_FLOAT(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
}

// 1 + e^t for -87 <= t <= 88 from +, *, fma and integer code only, so host and device give the
// same bits: t = n ln2 + r with |r| <= ln2/2 (Cody-Waite, two-part ln2), a degree-6 polynomial for
// e^r (minimax for relative error with e^0 = 1 exactly, 2^-28.5 before rounding), then one fma
// that scales by 2^n (n within -126..127, so 2^n is a normal float) and adds the 1, rounding once:
// within 1.6 ulp of 1 + e^t, and the fewest instructions found (the fused SiLU is bound by its
// arithmetic: every instruction here runs once per element). n = rint(t / ln2) by an fma with
// 1.5 * 2^23: the add rounds to an integer, to nearest even, for |t / ln2| < 2^22, and leaves n in
// the low bits of the sum, from which 2^n's bits follow with one integer multiply-add. Why not
// rintf and a float-to-int conversion: both run on the GPU's quarter-rate conversion unit, which
// the sigmoid's reciprocal also needs. Branch-free: the fused SiLU runs it on every element.
KILN_FP8_FN float one_plus_exp(float t) {
  constexpr float ROUNDER = 12582912.0f;     // 1.5 * 2^23
  constexpr unsigned ROUNDER_BITS = 0x4b400000u;
  const float shifted = KILN_Q_FMA(t, 1.44269502162933349609375f, ROUNDER);
  const float n = KILN_Q_ADD(shifted, -ROUNDER);
  float r = KILN_Q_FMA(-n, 0.693145751953125f, t);
  r = KILN_Q_FMA(-n, 1.428606765330187045e-06f, r);
  float p = 0.0014061240943421013f;
  p = KILN_Q_FMA(p, r, 0.008379011160612376f);
  p = KILN_Q_FMA(p, r, 0.04166477728919291f);
  p = KILN_Q_FMA(p, r, 0.16666365441313644f);
  p = KILN_Q_FMA(p, r, 0.5000000434377058f);
  p = KILN_Q_FMA(p, r, 1.00000004964037f);
  p = KILN_Q_FMA(p, r, 1.0f);
  // (bits - ROUNDER_BITS) is n in two's complement; unsigned wrap-around makes (n + 127) << 23.
  return KILN_Q_FMA(p, KILN_Q_FLOAT((KILN_Q_BITS(shifted) - ROUNDER_BITS + 127u) << 23), 1.0f);
}

constexpr float SMALLEST_NORMAL = 1.17549435e-38f;  // 2^-126

// 1 / d for d >= 1, correctly rounded where the result is a normal float and 0 where it would be
// subnormal (d > 2^126), as flush-to-zero arithmetic gives. On the device: __frcp_rn's own fast
// path (an approximate reciprocal and one fma refinement) without its range test and slow-path
// call, which made every sigmoid a branch with convergence barriers and kept the compiler from
// interleaving the elements' chains; the refinement's fma flushes to zero, which is what makes the
// sigmoid 0 past d = 2^126 with no select. bench/explore/twin_geometry.cu checks it against __frcp_rn
// flushed the same way for every float d in [1, 2^127) (0 differ).
KILN_FP8_FN float reciprocal_flushed(float d) {
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
  float r, refined;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  asm("fma.rn.ftz.f32 %0, %1, %2, %1;" : "=f"(refined) : "f"(r), "f"(-__fmaf_rn(d, r, -1.0f)));
  return refined;
#else
  const float r = 1.0f / d;
  return r < SMALLEST_NORMAL ? 0.0f : r;
#endif
}

// silu(gate) * up = gate * (1 / (1 + e^-gate)) * up, each step rounded once in fp32 (1 + e^-gate
// within 1.6 ulp, its reciprocal correctly rounded; no rounding to the input type between the
// activation and the quantizer). -gate is clamped to [-87, 88], the domain of one_plus_exp: below
// -87, e^-gate is under 2^-125, so 1 + e^-gate is 1 whatever the clamp does; past -gate = 87.34,
// 1 + e^-gate > 2^126 and the sigmoid is 0 (its reciprocal would be subnormal). NaN stays NaN
// through `gate`; silu(-inf) is NaN (-inf * 0), as gate / (1 + e^inf) is.
KILN_FP8_FN float silu_and_mul(float gate, float up) {
  const float t = fminf(fmaxf(-gate, -87.0f), 88.0f);
  return KILN_Q_MUL(KILN_Q_MUL(gate, reciprocal_flushed(one_plus_exp(t))), up);
}

// vLLM's UE8M0 scale: clamp to 1e-10, then the smallest power of two >= it (its exponent plus one
// when any mantissa bit is set): bit-exact with exp2f(ceilf(log2f(max(s, 1e-10)))).
KILN_FP8_FN unsigned ue8m0_exponent(float scale) {
  const unsigned u = KILN_Q_BITS(scale > UE8M0_FLOOR ? scale : UE8M0_FLOOR);
  return ((u >> 23) & 0xffu) + ((u & 0x7fffffu) != 0u ? 1u : 0u);
}
KILN_FP8_FN float ue8m0_scale(float scale) { return KILN_Q_FLOAT(ue8m0_exponent(scale) << 23); }

}  // namespace kiln::quant

// kiln: variant family
// The per-token-group quantizer family: one source, compiled per variant. kiln writes the
// variant's parameters as #defines in front of this file (src/jit/families.cpp names them and
// their allowed values; `kiln list` shows them):
//   KILN_Q_IN      0 bf16, 1 fp16, 2 fp32          input element
//   KILN_Q_GROUP   32, 64, 128                      elements per group, one scale each
//   KILN_Q_OUT     0 e4m3 (+-448), 1 int8 (+-127)   output code
//   KILN_Q_SCALES  0 row-major [M, G] fp32, 1 column-major [G, M] fp32, 2 column-major with M padded
//                  to a multiple of 4 (TMA-aligned), 3 UE8M0 exponents packed four to an int32,
//                  [ceil(G/4), M padded to 4] (DeepGEMM on SM100)
//   KILN_Q_UE8M0   1: scales rounded up to a power of two
//   KILN_Q_SILU    1: x is [M, 2K]; quantize silu(x[:, :K]) * x[:, K:]
//
// Geometry: 256-thread CTAs on a 1-D grid; each group has LANES threads and each thread loads two
// 16-byte vectors of every operand, so a group's lanes read contiguous 16 * LANES-byte runs. With
// row-major scales the grid is flat over every (row, group) pair, groups fastest, so consecutive
// CTAs stream consecutive memory. With column-major scales a CTA takes a tile of 8 rows by
// TILE_GROUPS groups, rows fastest, so its scale stores fill whole 32-byte sectors of a scale column
// instead of one scattered 4-byte store per group (which cost up to a third of the bandwidth at
// group 32), while each row still reads TILE_GROUPS consecutive groups. The numerics are
// the shared kernel's (fp8_e4m3.cuh) plus quant_numerics.cuh; the host reference compiles both.
//
// Needs x 16-byte aligned with a row stride (in elements) whose bytes are a multiple of 16, q
// aligned to VEC_OUT bytes (8 for 16-bit input, 4 for fp32) and scales 4-byte aligned
// (kiln::ops::GroupQuant checks this before launching).
#include "quant_numerics.cuh"
#include "grid_dependency.cuh"

#if !defined(KILN_Q_IN) || !defined(KILN_Q_GROUP) || !defined(KILN_Q_OUT) || !defined(KILN_Q_SCALES) || \
    !defined(KILN_Q_UE8M0) || !defined(KILN_Q_SILU)
#error "per_token_group_quant is a variant family: compile a variant (kiln writes its parameters)"
#endif

namespace {
constexpr unsigned THREADS = 256;
constexpr unsigned IN_BYTES = KILN_Q_IN == 2 ? 4 : 2;
constexpr unsigned VECS = 2;                      // 16-byte loads per thread per operand
constexpr unsigned VEC = 16 / IN_BYTES;           // elements per load
constexpr unsigned EPT = VECS * VEC;              // elements per thread
constexpr unsigned GROUP = KILN_Q_GROUP;
constexpr unsigned LANES = GROUP / EPT;           // threads per group: 2..16
constexpr unsigned GROUPS_PER_CTA = THREADS / LANES;
static_assert(GROUP % EPT == 0 && LANES >= 2 && LANES <= 16, "a group spans 2..16 lanes of one warp");
constexpr bool INT8 = KILN_Q_OUT == 1;
constexpr float QMAX = INT8 ? kiln::quant::INT8_MAX_CODE : kiln::fp8::E4M3_MAX;
constexpr float QMIN = INT8 ? kiln::quant::INT8_MIN_CODE : -kiln::fp8::E4M3_MAX;
constexpr bool COLUMN_SCALES = KILN_Q_SCALES != 0;
constexpr bool PACKED = KILN_Q_SCALES == 3;
constexpr unsigned TILE_ROWS = 8;  // kiln::ops::GroupQuant::grid: 8 fp32 scales fill one 32-byte sector
constexpr unsigned TILE_GROUPS = GROUPS_PER_CTA / TILE_ROWS;

__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

#if KILN_Q_IN == 1
__device__ __forceinline__ float fp16_to_float(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
#endif

// The VEC elements of one 16-byte vector as floats.
__device__ __forceinline__ void unpack(const uint4& v, float* f) {
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) {
#if KILN_Q_IN == 2
    f[j] = __uint_as_float(words[j]);
#elif KILN_Q_IN == 1
    f[2 * j] = fp16_to_float(static_cast<unsigned short>(words[j] & 0xffffu));
    f[2 * j + 1] = fp16_to_float(static_cast<unsigned short>(words[j] >> 16));
#else
    f[2 * j] = kiln::fp8::bf16_low(words[j]);
    f[2 * j + 1] = kiln::fp8::bf16_high(words[j]);
#endif
  }
}

// Two codes in the low 16 bits, `lo` at the lower address.
__device__ __forceinline__ unsigned codes2(float lo, float hi, const kiln::fp8::GroupDivisor& d) {
  if constexpr (INT8) {
    const float a = d.finite ? kiln::fp8::clamped_ratio_by_reciprocal(lo, d.scale, d.recip) : __fdiv_rn(lo, d.scale);
    const float b = d.finite ? kiln::fp8::clamped_ratio_by_reciprocal(hi, d.scale, d.recip) : __fdiv_rn(hi, d.scale);
    return kiln::quant::int8_code(kiln::quant::clamp_to(a, QMIN, QMAX)) |
           (static_cast<unsigned>(kiln::quant::int8_code(kiln::quant::clamp_to(b, QMIN, QMAX))) << 8);
  } else {
    return kiln::fp8::e4m3x2_in_group(lo, hi, d);
  }
}
}  // namespace

// x: [m, row_stride] elements (row_stride >= k, or >= 2k with SiLU); q: [m, k] bytes;
// scales: per KILN_Q_SCALES; groups = k / GROUP; scale_rows = the M extent of column-major scales
// (m, or m padded to 4).
extern "C" __global__ __launch_bounds__(THREADS) void per_token_group_quant(
    const void* __restrict__ x, unsigned char* __restrict__ q, void* __restrict__ scales, unsigned long long m,
    unsigned int groups, unsigned long long row_stride, unsigned int scale_rows, float eps) {
  kiln::pdl::enter_stream_order();
  const unsigned lane = threadIdx.x % LANES;
  const unsigned slot = threadIdx.x / LANES;
  unsigned long long row;
  unsigned g;
  if constexpr (COLUMN_SCALES) {
    // The packed layout's tiles also cover its padding (rows up to m padded to 4, groups up to a
    // whole word), which they write as zeros so a TMA load of the tile reads no garbage.
    const unsigned span = PACKED ? (groups + 3) / 4 * 4 : groups;
    const unsigned group_tiles = (span + TILE_GROUPS - 1) / TILE_GROUPS;
    row = static_cast<unsigned long long>(blockIdx.x / group_tiles) * TILE_ROWS + slot % TILE_ROWS;
    g = (blockIdx.x % group_tiles) * TILE_GROUPS + slot / TILE_ROWS;
    if (PACKED && (row >= m || g >= groups)) {
      if (lane == 0 && row < scale_rows && g < span)
        static_cast<unsigned char*>(scales)[((static_cast<unsigned long long>(g / 4) * scale_rows + row) * 4) + g % 4] = 0;
      return;
    }
    if (row >= m || g >= groups) return;
  } else {
    const unsigned long long item = static_cast<unsigned long long>(blockIdx.x) * GROUPS_PER_CTA + slot;
    if (item >= m * groups) return;
    row = item / groups;
    g = static_cast<unsigned>(item % groups);
  }
  const unsigned long long k = static_cast<unsigned long long>(groups) * GROUP;
  // Why this mask: a warp holds 32 / LANES groups, and only a group's own lanes exchange maxima.
  const unsigned mask = ((1u << LANES) - 1u) << ((threadIdx.x % 32u) & ~(LANES - 1u));

  const char* x_row = static_cast<const char*>(x) + (row * row_stride + static_cast<unsigned long long>(g) * GROUP) * IN_BYTES;
  float f[EPT];
#pragma unroll
  for (unsigned w = 0; w < VECS; ++w) {
    const unsigned at = (w * LANES + lane) * VEC;
    unpack(load_stream(x_row + at * IN_BYTES), f + w * VEC);
#if KILN_Q_SILU
    float up[VEC];
    unpack(load_stream(x_row + (k + at) * IN_BYTES), up);
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) f[w * VEC + j] = kiln::quant::silu_and_mul(f[w * VEC + j], up[j]);
#endif
  }

  float absmax = fabsf(f[0]);
#pragma unroll
  for (unsigned j = 1; j < EPT; ++j) absmax = fmaxf(absmax, fabsf(f[j]));
#pragma unroll
  for (unsigned offset = LANES / 2; offset > 0; offset >>= 1)
    absmax = fmaxf(absmax, __shfl_xor_sync(mask, absmax, offset));

  float scale = __fdiv_rn(fmaxf(absmax, eps), QMAX);
#if KILN_Q_UE8M0
  scale = kiln::quant::ue8m0_scale(scale);
#endif
  const kiln::fp8::GroupDivisor divisor{scale, __frcp_rn(scale), isfinite(scale) != 0};

  unsigned char* q_group = q + row * k + static_cast<unsigned long long>(g) * GROUP;
#pragma unroll
  for (unsigned w = 0; w < VECS; ++w) {
    unsigned pairs[VEC / 2];
#pragma unroll
    for (unsigned j = 0; j < VEC / 2; ++j) pairs[j] = codes2(f[w * VEC + 2 * j], f[w * VEC + 2 * j + 1], divisor);
    unsigned char* out = q_group + (w * LANES + lane) * VEC;
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint2*>(out) = make_uint2(pairs[0] | (pairs[1] << 16), pairs[2] | (pairs[3] << 16));
    } else {
      *reinterpret_cast<unsigned*>(out) = pairs[0] | (pairs[1] << 16);
    }
  }

  if (lane != 0) return;
#if KILN_Q_SCALES == 0
  static_cast<float*>(scales)[row * groups + g] = scale;
#elif KILN_Q_SCALES == 1 || KILN_Q_SCALES == 2
  static_cast<float*>(scales)[static_cast<unsigned long long>(g) * scale_rows + row] = scale;
#else
  const unsigned long long word = static_cast<unsigned long long>(g / 4) * scale_rows + row;
  static_cast<unsigned char*>(scales)[word * 4 + g % 4] = static_cast<unsigned char>(kiln::quant::ue8m0_exponent(scale));
#endif
}

// Exploration harness for the Hopper twin's geometry and division (kiln issue 6), built on the device
// with `nvcc -O3 -std=c++17 -arch=sm_90a -I kernels_src/common bench/explore/twin_geometry.cu`; run with
// the argument `flat` it times the shipped twin against issue 16's flat-grid and access-pattern
// candidates instead (L1-allocating loads, SGLang's lane mapping, streaming stores, on the
// 2026-12-03 twin's row grid and on the flat one), with `loads` the twin's loop with both load forms from
// decode to 8192 rows, with `check` it runs only the exhaustive numerics checks (exit 1 if any case differs). Every
// variant covers the twin's contract (grid (M, Y), any 1 <= Y <= K/128) and is checked byte for
// byte against the __fdiv_rn variant before it is timed, so a fast variant that changes bytes is
// reported, not kept.
//
// Variants: LANES threads per group (16: one uint4 each, 8: two, 4: four), THREADS per CTA, UNROLL
// groups loaded per slot before any is reduced, DIV (0: __fdiv_rn per element; 1: the kernel's
// e4m3x2_group, one correctly rounded reciprocal per group plus one fma correction per element;
// 2: x * reciprocal, wrong bytes, timed only as the bound with no division cost), PIPE (loads of
// the slot's next pass issued before this pass is reduced).
#include <cstring>
#include <iterator>
#include <random>

#include "geometry_harness.cuh"
#include "shape_sweep.cuh"
// The twin itself, for its constants and to time it as shipped; needs -I kernels_src/common for the
// kernel's own include of fp8_e4m3.cuh.
#include "../../kernels_src/hopper/fp8_act_quant_hopper.cu"
#include "quant_numerics.cuh"

namespace fp8 = kiln::fp8;

template <int DIV>
__device__ __forceinline__ unsigned pair_codes(float lo, float hi, const fp8::GroupDivisor& d) {
  if constexpr (DIV == 0) {
    return fp8::e4m3x2(fp8::clamped_ratio(lo, d.scale), fp8::clamped_ratio(hi, d.scale));
  } else if constexpr (DIV == 1) {
    const float f[2] = {lo, hi};
    unsigned pair;
    fp8::e4m3x2_group<1>(f, d, &pair);
    return pair;
  } else {
    return fp8::e4m3x2(fp8::clamp_ratio(lo * d.recip), fp8::clamp_ratio(hi * d.recip));
  }
}

// Load and store forms for the access-pattern candidates of `flat` mode. LOAD 0: the twin's loads
// until 2026-12-04, ld.global.nc.L1::no_allocate; 1: ld.global.nc (allocates in L1, so the second
// 16-byte half of a sector read by a wide lane hits there; the twin's since); 2: 0 plus the
// L2::256B prefetch-size hint. STORE 0: st.global;
// 1: st.global.cs (streaming, evict first).
template <int LOAD>
__device__ __forceinline__ uint4 load_as(const unsigned short* p) {
  if constexpr (LOAD == 0) {
    return load_no_allocate(p);
  } else if constexpr (LOAD == 1) {
    return load_stream(p);
  } else {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
  }
}

template <int STORE>
__device__ __forceinline__ void store_as(unsigned char* p, unsigned a, unsigned b) {
  if constexpr (STORE == 0) {
    *reinterpret_cast<uint2*>(p) = make_uint2(a, b);
  } else {
    asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(a), "r"(b) : "memory");
  }
}

template <int STORE>
__device__ __forceinline__ void store_as(unsigned char* p, unsigned a, unsigned b, unsigned c, unsigned d) {
  if constexpr (STORE == 0) {
    *reinterpret_cast<uint4*>(p) = make_uint4(a, b, c, d);
  } else {
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
  }
}

// The 2026-12-03 twin's mapping: lane `lane`'s vector `w` starts at element (w * 8 + lane) * 8.
constexpr unsigned HQ_VEC_STRIDE = HQ_LANES * HQ_VEC;

// The 2026-12-03 twin's row grid (M, Y): CTA blockIdx.y of a row owns groups [g0, g_end) of its
// `groups`, ceil(groups / Y) of them.
struct RowSpan {
  unsigned g0, g_end;
};
__device__ __forceinline__ RowSpan row_span(unsigned groups) {
  const unsigned gpc = groups / gridDim.y + (groups % gridDim.y != 0);
  const unsigned g0 = blockIdx.y * gpc;
  return {g0, min(g0 + gpc, groups)};
}

template <int LANES, int THREADS, int UNROLL, int DIV, int PIPE>
__global__ __launch_bounds__(THREADS) void twin(const unsigned short* __restrict__ x, unsigned char* __restrict__ q,
                                                float* __restrict__ scales, unsigned k) {
  constexpr int ELEMS = 128 / LANES;
  constexpr int VECS = ELEMS / 8;
  constexpr int SLOTS = THREADS / LANES;
  const unsigned sub = threadIdx.x / LANES;
  const unsigned lane = threadIdx.x % LANES;
  const unsigned groups = k / 128;
  const auto [g0, g_end] = row_span(groups);
  const unsigned mask = LANES == 32 ? 0xffffffffu : (((1u << LANES) - 1u) << ((threadIdx.x & 31u) & ~(LANES - 1u)));
  const size_t row = blockIdx.x;
  const unsigned short* xs = x + row * k + lane * 8;
  unsigned char* qs = q + row * k + lane * 8;
  float* ss = scales + row * groups;
  uint4 next[UNROLL][VECS];
  if (PIPE) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const unsigned gu = g0 + sub + u * SLOTS;
      if (gu < g_end) {
#pragma unroll
        for (int w = 0; w < VECS; ++w) next[u][w] = load_as<0>(xs + size_t(gu) * 128 + w * LANES * 8);
      }
    }
  }
  for (unsigned g = g0 + sub; g < g_end; g += SLOTS * UNROLL) {
    uint4 v[UNROLL][VECS];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const unsigned gu = g + u * SLOTS;
      if (PIPE) {
#pragma unroll
        for (int w = 0; w < VECS; ++w) v[u][w] = next[u][w];
        const unsigned gn = gu + SLOTS * UNROLL;
        if (gn < g_end) {
#pragma unroll
          for (int w = 0; w < VECS; ++w) next[u][w] = load_as<0>(xs + size_t(gn) * 128 + w * LANES * 8);
        }
      } else if (gu < g_end) {
#pragma unroll
        for (int w = 0; w < VECS; ++w) v[u][w] = load_as<0>(xs + size_t(gu) * 128 + w * LANES * 8);
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const unsigned gu = g + u * SLOTS;
      if (gu >= g_end) continue;
      float f[ELEMS];
#pragma unroll
      for (int w = 0; w < VECS; ++w) {
        const unsigned words[4] = {v[u][w].x, v[u][w].y, v[u][w].z, v[u][w].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          f[w * 8 + 2 * j] = fp8::bf16_low(words[j]);
          f[w * 8 + 2 * j + 1] = fp8::bf16_high(words[j]);
        }
      }
      float absmax = fabsf(f[0]);
#pragma unroll
      for (int j = 1; j < ELEMS; ++j) absmax = fmaxf(absmax, fabsf(f[j]));
#pragma unroll
      for (int off = LANES / 2; off > 0; off >>= 1) absmax = fmaxf(absmax, __shfl_xor_sync(mask, absmax, off));
      const fp8::GroupDivisor divisor = fp8::group_divisor(absmax);
#pragma unroll
      for (int w = 0; w < VECS; ++w) {
        unsigned pairs[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) pairs[j] = pair_codes<DIV>(f[w * 8 + 2 * j], f[w * 8 + 2 * j + 1], divisor);
        uint2 out{pairs[0] | (pairs[1] << 16), pairs[2] | (pairs[3] << 16)};
        *reinterpret_cast<uint2*>(qs + size_t(gu) * 128 + w * LANES * 8) = out;
      }
      if (lane == 0) ss[gu] = divisor.scale;
    }
  }
}

// A group's 8 lanes with either lane mapping. WIDE 0 (the twin): lane `lane` holds elements
// [8 lane, 8 lane + 8) and [64 + 8 lane, ...), so each load instruction of a group reads 128
// contiguous bytes and each lane stores two 8-byte halves. WIDE 1 (SGLang's): lane holds [16 lane,
// 16 lane + 16), two adjacent 16-byte loads and one 16-byte store per lane, half the store
// instructions. `group_x` and `group_q` point at the group's first element.
template <int WIDE, int LOAD>
__device__ __forceinline__ void load_group(const unsigned short* group_x, unsigned lane, uint4 (&v)[HQ_VECS]) {
#pragma unroll
  for (unsigned w = 0; w < HQ_VECS; ++w)
    v[w] = load_as<LOAD>(group_x + (WIDE ? lane * HQ_VECS * HQ_VEC + w * HQ_VEC : w * HQ_VEC_STRIDE + lane * HQ_VEC));
}

// EXACT false: SGLang's arithmetic (scale amax / 448 stored, x * (448 / amax) converted; no eps
// floor needed for these inputs), a peer for what inexact division buys in the same run.
template <int WIDE, int STORE, bool EXACT = true>
__device__ __forceinline__ void quantize_group_as(const uint4 (&v)[HQ_VECS], unsigned lane, unsigned mask,
                                                  unsigned char* group_q, float* scale_out) {
  float f[HQ_VECS * HQ_VEC];
#pragma unroll
  for (unsigned w = 0; w < HQ_VECS; ++w) {
    const unsigned words[4] = {v[w].x, v[w].y, v[w].z, v[w].w};
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
      f[w * HQ_VEC + 2 * j] = fp8::bf16_low(words[j]);
      f[w * HQ_VEC + 2 * j + 1] = fp8::bf16_high(words[j]);
    }
  }
  float absmax = fabsf(f[0]);
#pragma unroll
  for (unsigned j = 1; j < HQ_VECS * HQ_VEC; ++j) absmax = fmaxf(absmax, fabsf(f[j]));
#pragma unroll
  for (unsigned offset = HQ_LANES / 2; offset > 0; offset >>= 1)
    absmax = fmaxf(absmax, __shfl_xor_sync(mask, absmax, offset));
  fp8::GroupDivisor divisor = fp8::group_divisor(absmax);
  unsigned p[HQ_VECS * HQ_VEC / 2];
  if constexpr (EXACT) {
    fp8::e4m3x2_group<HQ_VECS * HQ_VEC / 2>(f, divisor, p);
  } else {
    const float inverse = fp8::E4M3_MAX / fmaxf(absmax, fp8::ABSMAX_EPS);
    divisor.scale = fmaxf(absmax, fp8::ABSMAX_EPS) * (1.0f / fp8::E4M3_MAX);
#pragma unroll
    for (unsigned j = 0; j < HQ_VECS * HQ_VEC / 2; ++j)
      p[j] = fp8::e4m3x2(fp8::clamp_ratio(f[2 * j] * inverse), fp8::clamp_ratio(f[2 * j + 1] * inverse));
  }
  if constexpr (WIDE) {
    store_as<STORE>(group_q + lane * HQ_VECS * HQ_VEC, p[0] | (p[1] << 16), p[2] | (p[3] << 16), p[4] | (p[5] << 16),
                    p[6] | (p[7] << 16));
  } else {
#pragma unroll
    for (unsigned w = 0; w < HQ_VECS; ++w)
      store_as<STORE>(group_q + w * HQ_VEC_STRIDE + lane * HQ_VEC, p[4 * w] | (p[4 * w + 1] << 16),
                      p[4 * w + 2] | (p[4 * w + 3] << 16));
  }
  if (lane == 0) *scale_out = divisor.scale;
}

// The twin's grid and row loop with another lane mapping, load or store form.
template <int WIDE, int LOAD, int STORE>
__global__ __launch_bounds__(HQ_THREADS) void twin_as(const unsigned short* __restrict__ x, unsigned char* __restrict__ q,
                                                      float* __restrict__ scales, unsigned k) {
  const unsigned sub = threadIdx.x / HQ_LANES;
  const unsigned lane = threadIdx.x % HQ_LANES;
  const unsigned groups = k / 128;
  const auto [g0, g_end] = row_span(groups);
  const unsigned mask = 0xffu << (threadIdx.x & 24u);
  const size_t row = blockIdx.x;
  for (unsigned g = g0 + sub; g < g_end; g += HQ_GROUPS_PER_CTA) {
    const size_t at = row * k + size_t(g) * 128;
    uint4 v[HQ_VECS];
    load_group<WIDE, LOAD>(x + at, lane, v);
    quantize_group_as<WIDE, STORE>(v, lane, mask, q + at, scales + row * groups + g);
  }
}

// The flat grid with another lane mapping, load or store form; GPS groups per slot, all loaded first.
// STREAM_ORDER: the twin's grid-dependency steps first (an H200 run of `flat` had the twin
// 0.2 us slower than this kernel at 1 x 7168; these steps are one of the two differences, the
// grid-stride loop the other).
template <int WIDE, int LOAD, int STORE, int THREADS, int GPS, bool EXACT = true, bool STREAM_ORDER = false>
__global__ __launch_bounds__(THREADS) void flat_as(const unsigned short* __restrict__ x, unsigned char* __restrict__ q,
                                                   float* __restrict__ scales, unsigned long long total_groups) {
  if constexpr (STREAM_ORDER) kiln::pdl::enter_stream_order();
  constexpr unsigned SLOTS = THREADS / HQ_LANES;
  const unsigned sub = threadIdx.x / HQ_LANES;
  const unsigned lane = threadIdx.x % HQ_LANES;
  const unsigned mask = 0xffu << (threadIdx.x & 24u);
  const unsigned long long first = static_cast<unsigned long long>(blockIdx.x) * SLOTS * GPS + sub;
  uint4 v[GPS][HQ_VECS];
#pragma unroll
  for (int u = 0; u < GPS; ++u) {
    const unsigned long long g = first + u * SLOTS;
    if (g < total_groups) load_group<WIDE, LOAD>(x + g * 128, lane, v[u]);
  }
#pragma unroll
  for (int u = 0; u < GPS; ++u) {
    const unsigned long long g = first + u * SLOTS;
    if (g < total_groups) quantize_group_as<WIDE, STORE, EXACT>(v[u], lane, mask, q + g * 128, scales + g);
  }
}

// Every (absmax, x) pair a group can hold: absmax is a bf16 magnitude (or 0), x any bf16 with
// |x| <= absmax (NaN and infinity included through the finite check). Counts codes where the
// reciprocal-and-correction ratio differs from __fdiv_rn.
__global__ void exhaustive_div(unsigned long long* mismatches, unsigned* first_bad) {
  const unsigned a_bits = blockIdx.x;  // 0 .. 0x7f80 (positive bf16 up to infinity)
  const float absmax = __uint_as_float(a_bits << 16);
  const fp8::GroupDivisor divisor = fp8::group_divisor(absmax);
  unsigned long long bad = 0;
  for (unsigned xb = threadIdx.x; xb < 65536; xb += blockDim.x) {
    const float xv = __uint_as_float(xb << 16);
    if (!(fabsf(xv) <= absmax)) continue;
    const unsigned ref = pair_codes<0>(xv, 0.0f, divisor);
    const unsigned got = pair_codes<1>(xv, 0.0f, divisor);
    if (ref != got) {
      ++bad;
      atomicCAS(first_bad, 0xffffffffu, (a_bits << 16) | xb);
    }
  }
  if (bad) atomicAdd(mismatches, bad);
}

// The fused SiLU's two shortcuts, over their whole domains: kiln::quant::reciprocal_flushed
// against __frcp_rn flushed to zero below 2^-126 (what the CPU reference computes) for every float
// d in [1, 2^127); and for every float t in [-87, 88], the 1.5 * 2^23 rounding in one_plus_exp
// gives an integer n within -126..127 whose 2^n bits the integer trick reproduces (the rest of
// the function is the same arithmetic on both sides).
__global__ void exhaustive_silu_parts(unsigned long long* mismatches, unsigned* first_bad) {
  constexpr unsigned long long RECIPROCALS = 0x7f000000ull - 0x3f800000ull;
  constexpr unsigned long long NEGATIVE = 0x42ae0001ull;  // bit patterns of 0 .. 87.0f, negated
  constexpr unsigned long long POSITIVE = 0x42b00001ull;  // bit patterns of 0 .. 88.0f
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < RECIPROCALS + NEGATIVE + POSITIVE; i += stride) {
    bool same;
    unsigned bits;
    if (i < RECIPROCALS) {
      bits = 0x3f800000u + static_cast<unsigned>(i);
      const float d = __uint_as_float(bits);
      const float exact = __frcp_rn(d);
      const float flushed = exact < kiln::quant::SMALLEST_NORMAL ? 0.0f : exact;
      same = __float_as_uint(kiln::quant::reciprocal_flushed(d)) == __float_as_uint(flushed);
    } else {
      const unsigned long long e = i - RECIPROCALS;
      bits = e < POSITIVE ? static_cast<unsigned>(e) : 0x80000000u | static_cast<unsigned>(e - POSITIVE);
      const float shifted = __fmaf_rn(__uint_as_float(bits), 1.44269502162933349609375f, 12582912.0f);
      const float n = __fadd_rn(shifted, -12582912.0f);
      same = n == rintf(n) && n >= -126.0f && n <= 127.0f &&
             ((__float_as_uint(shifted) - 0x4b400000u + 127u) << 23) == (static_cast<unsigned>(static_cast<int>(n) + 127) << 23);
    }
    if (!same) {
      ++bad;
      atomicCAS(first_bad, 0xffffffffu, bits);
    }
  }
  if (bad) atomicAdd(mismatches, bad);
}

using Kernel = void (*)(const unsigned short*, unsigned char*, float*, unsigned);

struct Variant {
  const char* name;
  Kernel kernel;
  int threads;
  int lanes;
};

#define V(L, T, U, D, P) Variant{"lanes" #L " threads" #T " unroll" #U " div" #D " pipe" #P, twin<L, T, U, D, P>, T, L}
static const Variant variants[] = {
    V(16, 128, 1, 0, 0), V(16, 128, 1, 1, 0), V(16, 128, 1, 1, 1), V(8, 64, 1, 1, 0),  V(8, 64, 1, 1, 1),
    V(8, 128, 1, 1, 0),  V(8, 128, 1, 1, 1),  V(8, 256, 1, 1, 0),  V(8, 256, 1, 1, 1), V(4, 64, 1, 1, 0),
    V(4, 64, 1, 1, 1),   V(4, 128, 1, 1, 0),  V(4, 128, 1, 1, 1),  V(8, 128, 2, 1, 1),
};

static unsigned twin_blocks(size_t groups) { return unsigned((groups + HQ_GROUPS_PER_CTA - 1) / HQ_GROUPS_PER_CTA); }

struct FlatVariant {
  const char* name;
  void (*kernel)(const unsigned short*, unsigned char*, float*, unsigned long long);
  unsigned threads, gps;
};

template <class TimedFn, class ReportFn>
static void time_flat(const FlatVariant& c, size_t groups, TimedFn& timed, ReportFn& report) {
  const unsigned long long per_cta = c.threads / 8 * c.gps;
  const unsigned blocks = unsigned((groups + per_cta - 1) / per_cta);
  report(c.name, timed([&](auto x, auto q, auto s) { c.kernel<<<blocks, c.threads>>>(x, q, s, groups); }, false));
}

// The shipped twin on kiln's grid (ops::fp8_quant_grid's rule) against flat-grid candidates, at
// the shapes of issue 16's table; every candidate's bytes are compared with the twin's.
static void run_flat(double ceiling) {
  const FlatVariant candidates[] = {{"flat threads256 gps2", flat_as<0, 0, 0, 256, 2>, 256, 2},
                                    {"flat wide ld1 128 gps1", flat_as<1, 1, 0, 128, 1>, 128, 1},
                                    {"flat wide ld0 128 gps1", flat_as<1, 0, 0, 128, 1>, 128, 1},
                                    {"flat wide ld1 256 gps2", flat_as<1, 1, 0, 256, 2>, 256, 2},
                                    {"flat wide ld2 256 gps2", flat_as<1, 2, 0, 256, 2>, 256, 2},
                                    {"flat ld2 256 gps2", flat_as<0, 2, 0, 256, 2>, 256, 2},
                                    {"flat wide ld1 cs 256 gps2", flat_as<1, 1, 1, 256, 2>, 256, 2},
                                    {"SGLang-like, inexact", flat_as<1, 1, 0, 128, 1, false>, 128, 1},
                                    {"flat wide ld1 128 gps1 gd", flat_as<1, 1, 0, 128, 1, true, true>, 128, 1},
                                    {"flat wide ld0 128 gps1 gd", flat_as<1, 0, 0, 128, 1, true, true>, 128, 1}};
  struct GridVariant {
    const char* name;
    Kernel kernel;
  };
  // "grid": the 2026-12-03 twin's (M, Y) grid with its row loop, on the Y rule of then.
  const GridVariant grid_candidates[] = {{"grid ld0 (the old twin)", twin_as<0, 0, 0>},
                                         {"grid ld1", twin_as<0, 1, 0>},      {"grid ld2", twin_as<0, 2, 0>},
                                         {"grid st.cs", twin_as<0, 0, 1>},    {"grid wide ld0", twin_as<1, 0, 0>},
                                         {"grid wide ld1", twin_as<1, 1, 0>}, {"grid wide ld2", twin_as<1, 2, 0>},
                                         {"grid wide ld1 st.cs", twin_as<1, 1, 1>}};
  const unsigned shapes[][2] = {{1, 7168},    {16, 7168},   {512, 7168},   {2048, 7168},
                                {8192, 7168}, {32768, 7168}, {16384, 18432}, {4096, 5120}};
  for_each_shape(shapes, std::size(shapes), ceiling, [&](unsigned m, unsigned k, size_t groups, auto& timed, auto& report) {
    const unsigned busy_y = (k / 128 + 15) / 16;
    const unsigned fill_y = (3072 + m - 1) / m;
    const unsigned y = (m >= 3072 || busy_y <= 1) ? 1 : std::min(fill_y, busy_y);
    report("twin (kiln)", timed([&](auto x, auto q, auto s) {
             per_token_group_quant_fp8_hopper<<<twin_blocks(groups), HQ_THREADS>>>(x, q, s, k, m);
           }, true));
    for (const auto& c : grid_candidates)
      report(c.name, timed([&](auto x, auto q, auto s) { c.kernel<<<dim3(m, y), 128>>>(x, q, s, k); }, false));
    for (const auto& c : candidates) time_flat(c, groups, timed, report);
  });
}

// The twin's own loop with one of the harness's load forms (load_as), with and without its
// grid-dependency steps. An H200 run of `flat` had a flat kernel of the twin's
// geometry with L1::no_allocate loads 0.1-0.4 us faster than the twin at M <= 512 x 7168 and
// 4% slower from 2048 rows: these say whether a per-size choice of loads is worth a variant.
template <int LOAD, bool STREAM_ORDER>
__global__ __launch_bounds__(HQ_THREADS, KILN_HQ_MIN_CTAS) void twin_loads(const unsigned short* __restrict__ x,
                                                                           unsigned char* __restrict__ q,
                                                                           float* __restrict__ scales, unsigned k,
                                                                           unsigned m) {
  if constexpr (STREAM_ORDER) kiln::pdl::enter_stream_order();
  quantize_groups(x, q, scales, static_cast<unsigned long long>(m) * (k / 128),
                  [](const unsigned short* p) { return load_as<LOAD>(p); });
}

// `loads` mode: the twin's load forms from decode to 8192 rows, beside the flat kernels of the
// same geometry and the inexact peer.
static void run_loads(double ceiling) {
  struct TwinVariant {
    const char* name;
    void (*kernel)(const unsigned short*, unsigned char*, float*, unsigned, unsigned);
  };
  const TwinVariant twins[] = {{"twin ld1", twin_loads<1, true>},
                               {"twin ld0", twin_loads<0, true>},
                               {"twin ld1, no gd", twin_loads<1, false>},
                               {"twin ld0, no gd", twin_loads<0, false>}};
  const FlatVariant flats[] = {{"flat wide ld1 128 gps1", flat_as<1, 1, 0, 128, 1>, 128, 1},
                               {"flat wide ld0 128 gps1", flat_as<1, 0, 0, 128, 1>, 128, 1},
                               {"flat wide ld0 128 gps1 gd", flat_as<1, 0, 0, 128, 1, true, true>, 128, 1},
                               {"SGLang-like, inexact", flat_as<1, 1, 0, 128, 1, false>, 128, 1}};
  const unsigned shapes[][2] = {{1, 7168},     {16, 7168},   {128, 7168},   {512, 7168},   {768, 7168},
                                {1024, 7168},  {1536, 7168}, {2048, 7168},  {4096, 7168},  {8192, 7168},
                                {16, 18432},   {256, 18432}, {512, 18432},  {1024, 18432}, {128, 2048},
                                {2048, 2048},  {4096, 2048}, {8192, 2048}};
  for_each_shape(shapes, std::size(shapes), ceiling, [&](unsigned m, unsigned k, size_t groups, auto& timed, auto& report) {
    const auto shipped = [&](auto x, auto q, auto s) {
      per_token_group_quant_fp8_hopper<<<twin_blocks(groups), HQ_THREADS>>>(x, q, s, k, m);
    };
    report("twin (kiln)", timed(shipped, true));
    for (const auto& c : twins)
      report(c.name, timed([&](auto x, auto q, auto s) {
               c.kernel<<<twin_blocks(groups), HQ_THREADS>>>(x, q, s, k, m);
             }, false));
    for (const auto& c : flats) time_flat(c, groups, timed, report);
    // Why again: the first kernel timed after a shape's buffers are filled may pay for it.
    report("twin (kiln), again", timed(shipped, false));
  });
}

// Runs one exhaustive check (a kernel counting mismatches) and prints its count and first case.
template <class Launch>
static unsigned long long exhaustive(const char* what, Launch launch) {
  unsigned long long* d_bad;
  unsigned* d_first;
  CHECK(cudaMalloc(&d_bad, 8));
  CHECK(cudaMalloc(&d_first, 4));
  CHECK(cudaMemset(d_bad, 0, 8));
  CHECK(cudaMemset(d_first, 0xff, 4));
  launch(d_bad, d_first);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  unsigned long long bad = 0;
  unsigned first = 0;
  CHECK(cudaMemcpy(&bad, d_bad, 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&first, d_first, 4, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_bad));
  CHECK(cudaFree(d_first));
  std::printf("exhaustive %s: %llu differ (first 0x%08x)\n", what, bad, first);
  return bad;
}

int main(int argc, char** argv) {
  const bool flat_mode = argc > 1 && std::strcmp(argv[1], "flat") == 0;
  const bool loads_mode = argc > 1 && std::strcmp(argv[1], "loads") == 0;
  const bool check_mode = argc > 1 && std::strcmp(argv[1], "check") == 0;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);

  if (!flat_mode && !loads_mode) {
    unsigned long long bad = exhaustive("(absmax, x) bf16 pairs, e4m3 codes by reciprocal against __fdiv_rn",
                                        [](unsigned long long* b, unsigned* f) { exhaustive_div<<<0x7f81, 256>>>(b, f); });
    bad += exhaustive("SiLU parts (reciprocal_flushed against flushed __frcp_rn; 1.5 * 2^23 rounding to 2^n)",
                      [](unsigned long long* b, unsigned* f) { exhaustive_silu_parts<<<132 * 16, 256>>>(b, f); });
    if (check_mode) return bad == 0 ? 0 : 1;
  }

  const double ceiling = copy_ceiling_gbps();
  std::printf("copy ceiling %.0f GB/s\n", ceiling);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  if (flat_mode) {
    run_flat(ceiling);
    return 0;
  }
  if (loads_mode) {
    run_loads(ceiling);
    return 0;
  }

  struct Shape {
    unsigned m, k;
  };
  const Shape shapes[] = {{16384, 2048}, {32768, 2048}, {8192, 7168}, {8192, 5120}, {2048, 7168}, {4576, 7168},
                          {1168, 7168}, {512, 7168}, {128, 7168}, {512, 18432}, {128, 18432}, {16, 7168}};
  std::mt19937 rng(42);
  for (const Shape& s : shapes) {
    const size_t elems = size_t(s.m) * s.k;
    const size_t in_bytes = elems * 2, q_bytes = elems, sc_bytes = elems / 128 * 4;
    const size_t set_bytes = in_bytes + q_bytes + sc_bytes;
    // Rotate through enough sets to defeat the 60 MB L2.
    const int sets = std::max<int>(1, int((200u << 20) / set_bytes) + 1);
    const std::vector<unsigned short> host = random_bf16(elems, rng);
    std::vector<unsigned short*> xin(sets);
    std::vector<unsigned char*> qout(sets);
    std::vector<float*> sout(sets);
    for (int i = 0; i < sets; ++i) {
      CHECK(cudaMalloc(&xin[i], in_bytes));
      CHECK(cudaMalloc(&qout[i], q_bytes));
      CHECK(cudaMalloc(&sout[i], sc_bytes));
      CHECK(cudaMemcpy(xin[i], host.data(), in_bytes, cudaMemcpyHostToDevice));
    }
    std::vector<unsigned char> ref_q(q_bytes), got_q(q_bytes);
    std::vector<float> ref_s(elems / 128), got_s(elems / 128);
    const unsigned groups = s.k / 128;
    std::printf("\nM %u K %u (%d buffer sets)\n", s.m, s.k, sets);
    std::printf("%-34s %6s %9s %9s %7s %s\n", "variant", "Y", "us", "GB/s", "%ceil", "bytes");
    bool have_ref = false;
    for (const Variant& v : variants) {
      const unsigned slots = v.threads / v.lanes;
      std::vector<unsigned> ys;
      for (unsigned y = 1; y <= groups && y <= 16; y *= 2) ys.push_back(y);
      if ((groups + slots - 1) / slots > 16) ys.push_back((groups + slots - 1) / slots);
      for (unsigned y : ys) {
        dim3 grid(s.m, y);
        CHECK(cudaMemset(qout[0], 0xAB, q_bytes));
        CHECK(cudaMemset(sout[0], 0xAB, sc_bytes));
        v.kernel<<<grid, v.threads>>>(xin[0], qout[0], sout[0], s.k);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        const char* verdict = "ref";
        if (!have_ref) {
          CHECK(cudaMemcpy(ref_q.data(), qout[0], q_bytes, cudaMemcpyDeviceToHost));
          CHECK(cudaMemcpy(ref_s.data(), sout[0], sc_bytes, cudaMemcpyDeviceToHost));
          have_ref = true;
        } else {
          CHECK(cudaMemcpy(got_q.data(), qout[0], q_bytes, cudaMemcpyDeviceToHost));
          CHECK(cudaMemcpy(got_s.data(), sout[0], sc_bytes, cudaMemcpyDeviceToHost));
          const bool same = got_q == ref_q && std::memcmp(got_s.data(), ref_s.data(), sc_bytes) == 0;
          verdict = same ? "same" : "DIFFER";
        }
        std::vector<float> t;
        for (int i = 0; i < 40; ++i) {
          const int b = i % sets;
          CHECK(cudaEventRecord(e0));
          v.kernel<<<grid, v.threads>>>(xin[b], qout[b], sout[b], s.k);
          CHECK(cudaEventRecord(e1));
          CHECK(cudaEventSynchronize(e1));
          float ms;
          CHECK(cudaEventElapsedTime(&ms, e0, e1));
          if (i >= 5) t.push_back(ms);
        }
        const double us = median(t) * 1e3;
        const double gbs = (3.0 * elems + 4.0 * elems / 128) / (us * 1e-6) / 1e9;
        std::printf("%-34s %6u %9.2f %9.0f %6.1f%% %s\n", v.name, y, us, gbs, 100 * gbs / ceiling, verdict);
      }
    }
    for (int i = 0; i < sets; ++i) {
      CHECK(cudaFree(xin[i]));
      CHECK(cudaFree(qout[i]));
      CHECK(cudaFree(sout[i]));
    }
  }
  return 0;
}

// Hopper twin of per_token_group_quant_fp8 (kernels_src/common): the same bytes from fewer, fatter
// CTAs. 8 threads per 128-element group, each loading 16 contiguous bf16 (two uint4) and storing
// their 16 e4m3 codes as one uint4; 16 groups per 128-thread CTA.
//
// Launch: block 128, grid (X, 1, 1) with X = min(ceil(M * L / 16), 2^31 - 1), L = K / 128
// (kiln::ops::fp8_quant_grid). Groups are contiguous in x, q and the row-major scales, so the grid
// is flat over all M * L groups: CTA b's slot `sub` takes groups (b + i * X) * 16 + sub, i = 0, 1,
// ... (one pass unless the grid is capped). Needs x and q 16-byte aligned.
//
// Why this geometry and these loads (H200; docs/performance.md, "The twin's loads"): loads
// that allocate in L1 (plain ld.global.nc) took the twin from 93% to 100% of the copy ceiling at
// 32768 x 7168, against L1::no_allocate (which small grids keep: HQ_NO_ALLOCATE_BELOW); the flat grid (consecutive CTAs stream consecutive
// memory, no CTA idles on a row's partial last pass) gained another 1-9% over the (M, Y) grid with
// a row loop at 512..16384 rows; 16 contiguous elements per lane (SGLang's mapping) halve the
// store instructions and were 0.2-0.4% ahead of two 128-byte runs per load instruction. And
// (docs/performance.md, "The twin's geometry"): 8 lanes beat 4 and 16, and the division by the group
// scale done as one reciprocal per group plus an fma correction per element saves issue slots.
#include "fp8_e4m3.cuh"
#include "grid_dependency.cuh"

namespace {
// bench/explore/sglang_compare.sh overrides it to time SGLang's 256-thread CTAs with the twin's loop.
#ifndef KILN_HQ_THREADS
#define KILN_HQ_THREADS 128
#endif
constexpr unsigned HQ_THREADS = KILN_HQ_THREADS;
// Why 16 CTAs per SM (32 registers, no spill): the grid-stride loop, needed only for grids past
// 2^31 - 1 CTAs, took the kernel from the measured one-pass build's 32 registers to 48, which
// leaves room for 10 CTAs of 128 threads per SM instead of 16. bench/explore/family_geometry.sh
// overrides it.
#ifndef KILN_HQ_MIN_CTAS
#define KILN_HQ_MIN_CTAS 16
#endif
constexpr unsigned HQ_LANES = 8;                               // threads per group: kiln::ops::FP8_QUANT_HOPPER_LANES
constexpr unsigned HQ_VECS = 2;                                // uint4 loads per thread per group
constexpr unsigned HQ_VEC = 8;                                 // bf16 per uint4
constexpr unsigned HQ_RUN = HQ_VECS * HQ_VEC;                  // contiguous elements per thread: kiln::ops::FP8_QUANT_HOPPER_RUN
constexpr unsigned HQ_GROUPS_PER_CTA = HQ_THREADS / HQ_LANES;  // kiln::ops::FP8_QUANT_HOPPER_GROUPS_PER_CTA
static_assert(HQ_LANES * HQ_RUN == kiln::fp8::GROUP, "a group's lanes cover it once");

// Why ld.global.nc without L1::no_allocate for large grids: with it, the twin took 93% of the copy
// ceiling, without it 100% (H200; docs/performance.md, "The twin's loads"); x is read once either way.
__device__ __forceinline__ uint4 load_stream(const unsigned short* p) {
  uint4 v;
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Why L1::no_allocate below HQ_NO_ALLOCATE_BELOW groups: a grid this small is a few waves at most,
// and there the loads that skip L1 finish sooner: 1-4% at 16-512 x 7168, 16 x 18432, 128 and
// 2048 x 2048 (32768 groups); the L1-allocating loads win from 256 x 18432 (36864 groups) and
// 768 x 7168 up, by 3-6% from 1024 rows (the twin's own loop, H200; docs/performance.md, "The
// twin's loads").
__device__ __forceinline__ uint4 load_no_allocate(const unsigned short* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
constexpr unsigned long long HQ_NO_ALLOCATE_BELOW = 36864;

// One thread's 16 contiguous elements of one group: the group max over the 8 lanes of `mask`, then
// 16 codes stored at `q`, and the scale at `scale_out` from lane 0.
__device__ __forceinline__ void quantize_run(const uint4 (&v)[HQ_VECS], unsigned mask, unsigned char* q,
                                             float* scale_out) {
  float f[HQ_RUN];
#pragma unroll
  for (unsigned w = 0; w < HQ_VECS; ++w) {
    const unsigned words[4] = {v[w].x, v[w].y, v[w].z, v[w].w};
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
      f[w * HQ_VEC + 2 * j] = kiln::fp8::bf16_low(words[j]);
      f[w * HQ_VEC + 2 * j + 1] = kiln::fp8::bf16_high(words[j]);
    }
  }
  float absmax = kiln::fp8::max_magnitude<HQ_RUN>(f);
#pragma unroll
  for (unsigned offset = HQ_LANES / 2; offset > 0; offset >>= 1)
    absmax = fmaxf(absmax, __shfl_xor_sync(mask, absmax, offset));

  const kiln::fp8::GroupDivisor divisor = kiln::fp8::group_divisor(absmax);
  unsigned p[HQ_RUN / 2];
  kiln::fp8::e4m3x2_group<HQ_RUN / 2>(f, divisor, p);
  *reinterpret_cast<uint4*>(q) =
      make_uint4(p[0] | (p[1] << 16), p[2] | (p[3] << 16), p[4] | (p[5] << 16), p[6] | (p[7] << 16));
  if (scale_out) *scale_out = divisor.scale;
}

// The CTA's slots over all `groups` groups of the flat grid, each reading its 16 elements with
// `load` (bench/explore/twin_geometry.cu's `loads` mode passes other load forms).
template <class Load>
__device__ __forceinline__ void quantize_groups(const unsigned short* __restrict__ x, unsigned char* __restrict__ q,
                                                float* __restrict__ scales, unsigned long long groups, Load load) {
  const unsigned sub = threadIdx.x / HQ_LANES;
  const unsigned lane = threadIdx.x % HQ_LANES;
  // Why an 8-lane mask: a group's lanes always run the same iterations, but the warp's other
  // slots may run one fewer.
  const unsigned mask = 0xffu << (threadIdx.x & 24u);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * HQ_GROUPS_PER_CTA;
  // tests/test_fp8_reference.cpp ("the twin's work split ...") walks exactly this loop.
  for (unsigned long long g = static_cast<unsigned long long>(blockIdx.x) * HQ_GROUPS_PER_CTA + sub; g < groups;
       g += stride) {
    const unsigned long long at = g * kiln::fp8::GROUP + lane * HQ_RUN;
    uint4 v[HQ_VECS];
#pragma unroll
    for (unsigned w = 0; w < HQ_VECS; ++w) v[w] = load(x + at + w * HQ_VEC);
    quantize_run(v, mask, q + at, lane == 0 ? scales + g : nullptr);
  }
}
}  // namespace

extern "C" __global__ __launch_bounds__(HQ_THREADS, KILN_HQ_MIN_CTAS) void per_token_group_quant_fp8_hopper(
    const unsigned short* __restrict__ x, unsigned char* __restrict__ q, float* __restrict__ scales,
    unsigned int k, unsigned int m) {
  kiln::pdl::enter_stream_order();
  // Why 64-bit: M * L passes 2^32 groups for large activations (and M * K elements far sooner).
  const unsigned long long groups = static_cast<unsigned long long>(m) * (k / kiln::fp8::GROUP);
  // Why a branch and not a second kernel: it is uniform over the grid, and the pick stays one kernel.
  if (groups < HQ_NO_ALLOCATE_BELOW)
    quantize_groups(x, q, scales, groups, [](const unsigned short* p) { return load_no_allocate(p); });
  else
    quantize_groups(x, q, scales, groups, [](const unsigned short* p) { return load_stream(p); });
}

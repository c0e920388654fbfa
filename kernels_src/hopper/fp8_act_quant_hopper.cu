// Hopper twin of per_token_group_quant_fp8 (kernels_src/common): same arguments, same bytes,
// fewer and fatter CTAs. 8 threads per 128-element group, each loading two uint4 (16 bf16) and
// storing two uint2 (16 e4m3); 16 group slots per 128-thread CTA.
//
// Launch: block 128, grid (M, Y, 1) with 1 <= Y <= K/128 (kiln::ops::fp8_quant_grid). CTA
// blockIdx.y owns groups [g0, g_end), gpc = ceil(L / Y); slot `sub` takes groups g0 + sub,
// g0 + sub + 16, ..., so any Y covers every group once. Needs x 16-byte and q 8-byte aligned.
//
// Why this geometry (bench/results/2026-12-03-h200-twin-geometry.md): on the H200, 8 lanes with
// two loads each beat 16 lanes with one (16 and 4 lanes, 64 and 256 threads, deeper unrolls and
// software pipelining were measured and lost or tied), and the division by the group scale done
// as one reciprocal per group plus an fma correction per element saves issue slots at no cost in
// bytes. Plain `-Xptxas -v`: 40 registers, no spills, no local memory.
#include "fp8_e4m3.cuh"
#include "grid_dependency.cuh"

namespace {
constexpr unsigned HQ_THREADS = 128;
#ifndef KILN_HQ_MIN_CTAS
#define KILN_HQ_MIN_CTAS 1  // CTAs per SM the registers must allow (bench/family_geometry.sh tries more)
#endif
constexpr unsigned HQ_LANES = 8;                               // threads per group
constexpr unsigned HQ_VECS = 2;                                // uint4 loads per thread per group
constexpr unsigned HQ_VEC = 8;                                 // bf16 per uint4
constexpr unsigned HQ_GROUPS_PER_CTA = HQ_THREADS / HQ_LANES;  // kiln::ops::FP8_QUANT_HOPPER_GROUPS_PER_CTA
// Lane `lane`'s vector `w` starts at element (w * HQ_LANES + lane) * HQ_VEC of its group, so each
// load instruction of a group's 8 lanes reads 128 contiguous bytes.
constexpr unsigned HQ_VEC_STRIDE = HQ_LANES * HQ_VEC;

// Why ld.global.nc.L1::no_allocate: x is read once; keep it out of L1 and off the coherent path.
__device__ __forceinline__ uint4 load_stream(const unsigned short* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// One thread's 16 elements of one group: the group max over the 8 lanes of `mask`, then 16 codes.
__device__ __forceinline__ void quantize_slice(const uint4 (&v)[HQ_VECS], unsigned mask, unsigned char* q,
                                               float* scale_out) {
  float f[HQ_VECS * HQ_VEC];
#pragma unroll
  for (unsigned w = 0; w < HQ_VECS; ++w) {
    const unsigned words[4] = {v[w].x, v[w].y, v[w].z, v[w].w};
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
      f[w * HQ_VEC + 2 * j] = kiln::fp8::bf16_low(words[j]);
      f[w * HQ_VEC + 2 * j + 1] = kiln::fp8::bf16_high(words[j]);
    }
  }
  float absmax = fabsf(f[0]);
#pragma unroll
  for (unsigned j = 1; j < HQ_VECS * HQ_VEC; ++j) absmax = fmaxf(absmax, fabsf(f[j]));
#pragma unroll
  for (unsigned offset = HQ_LANES / 2; offset > 0; offset >>= 1)
    absmax = fmaxf(absmax, __shfl_xor_sync(mask, absmax, offset));

  const kiln::fp8::GroupDivisor divisor = kiln::fp8::group_divisor(absmax);
  unsigned pairs[HQ_VECS * HQ_VEC / 2];
  kiln::fp8::e4m3x2_group<HQ_VECS * HQ_VEC / 2>(f, divisor, pairs);
#pragma unroll
  for (unsigned w = 0; w < HQ_VECS; ++w) {
    const unsigned* p = pairs + w * HQ_VEC / 2;
    *reinterpret_cast<uint2*>(q + w * HQ_VEC_STRIDE) = make_uint2(p[0] | (p[1] << 16), p[2] | (p[3] << 16));
  }
  if (scale_out) *scale_out = divisor.scale;
}
}  // namespace

extern "C" __global__ __launch_bounds__(HQ_THREADS, KILN_HQ_MIN_CTAS) void per_token_group_quant_fp8_hopper(
    const unsigned short* __restrict__ x, unsigned char* __restrict__ q, float* __restrict__ scales,
    unsigned int k) {
  kiln::pdl::enter_stream_order();
  const unsigned sub = threadIdx.x / HQ_LANES;
  const unsigned lane = threadIdx.x % HQ_LANES;
  const unsigned groups = k / kiln::fp8::GROUP;
  // The span, as kiln::ops::fp8_quant_hopper_span computes it on the host.
  const unsigned gpc = groups / gridDim.y + (groups % gridDim.y != 0);
  const unsigned g0 = blockIdx.y * gpc;
  const unsigned g_end = g0 + gpc < groups ? g0 + gpc : groups;
  // Why an 8-lane mask: a group's lanes always run the same iterations, but the warp's other
  // slots may run one fewer.
  const unsigned mask = 0xffu << (threadIdx.x & 24u);

  // Why size_t: M * K passes 2^32 for large activations.
  const size_t row = blockIdx.x;
  const unsigned short* xs = x + row * k + lane * HQ_VEC;
  unsigned char* qs = q + row * k + lane * HQ_VEC;
  float* ss = scales + row * groups;

  // tests/test_fp8_reference.cpp ("the twin's work split ...") walks exactly this loop.
  for (unsigned g = g0 + sub; g < g_end; g += HQ_GROUPS_PER_CTA) {
    const size_t at = static_cast<size_t>(g) * kiln::fp8::GROUP;
    uint4 v[HQ_VECS];
#pragma unroll
    for (unsigned w = 0; w < HQ_VECS; ++w) v[w] = load_stream(xs + at + w * HQ_VEC_STRIDE);
    quantize_slice(v, mask, qs + at, lane == 0 ? ss + g : nullptr);
  }
}

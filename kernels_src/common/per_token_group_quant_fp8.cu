// Per-token-group FP8 quantizer, every GPU: bf16 [M, K] in, e4m3 [M, K] and one fp32 scale per
// 128-element group ([M, K/128]) out, with vLLM's per_token_group_quant_fp8 numerics.
//
// Launch: block 128, grid (M, K/128, 1); one CTA per group, one element per thread. K must be a
// multiple of 128. Two entries: per_token_group_quant_fp8, and per_token_group_quant_fp8_pdl for
// launches with programmatic dependent launch. The Hopper twin (kernels_src/hopper/fp8_act_quant_hopper.cu) takes the same
// arguments and writes the same bytes.
#include "fp8_e4m3.cuh"
#include "grid_dependency.cuh"

namespace {
constexpr unsigned THREADS = kiln::fp8::GROUP;
constexpr unsigned WARPS = THREADS / 32;
static_assert(WARPS == 4, "the final reduction below reads four warp maxima");

// Why a template and two entries: the grid-dependency steps (grid_dependency.cuh) halved this
// kernel's throughput (7.6% against 15.2% of the copy ceiling at 32768 x 7168 on the H200;
// docs/performance.md, "PDL"), as every one of its one-group CTAs pays them; so
// only the entry kiln launches with PDL has them (kiln::ops::FP8_QUANT_PDL_ENTRY).
template <bool STREAM_ORDER>
__device__ __forceinline__ void quantize_group(const unsigned short* __restrict__ x, unsigned char* __restrict__ q,
                                               float* __restrict__ scales, unsigned int k) {
  __shared__ float warp_absmax[WARPS];
  if constexpr (STREAM_ORDER) kiln::pdl::enter_stream_order();
  const unsigned tid = threadIdx.x;
  const unsigned groups = k / kiln::fp8::GROUP;
  const size_t row = blockIdx.x;
  // Why size_t: M * K passes 2^32 for large activations.
  const size_t i = row * k + static_cast<size_t>(blockIdx.y) * kiln::fp8::GROUP + tid;

  const float v = kiln::fp8::bf16_to_float(x[i]);
  float absmax = fabsf(v);
#pragma unroll
  for (unsigned offset = 16; offset > 0; offset >>= 1)
    absmax = fmaxf(absmax, __shfl_xor_sync(0xffffffffu, absmax, offset));
  if (tid % 32 == 0) warp_absmax[tid / 32] = absmax;
  __syncthreads();
  absmax = fmaxf(fmaxf(warp_absmax[0], warp_absmax[1]), fmaxf(warp_absmax[2], warp_absmax[3]));

  const float scale = kiln::fp8::group_scale(absmax);
  q[i] = kiln::fp8::e4m3(kiln::fp8::clamped_ratio(v, scale));
  if (tid == 0) scales[row * groups + blockIdx.y] = scale;
}
}  // namespace

extern "C" __global__ __launch_bounds__(THREADS) void per_token_group_quant_fp8(
    const unsigned short* __restrict__ x, unsigned char* __restrict__ q, float* __restrict__ scales,
    unsigned int k) {
  quantize_group<false>(x, q, scales, k);
}

// The same, waiting on the prior grid first: the entry for launches with PDL.
extern "C" __global__ __launch_bounds__(THREADS) void per_token_group_quant_fp8_pdl(
    const unsigned short* __restrict__ x, unsigned char* __restrict__ q, float* __restrict__ scales,
    unsigned int k) {
  quantize_group<true>(x, q, scales, k);
}

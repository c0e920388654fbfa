// Hopper twin of per_token_group_quant_fp8 (kernels_src/common): same arguments, same bytes,
// fewer and fatter CTAs. 16 threads per 128-element group, each loading one uint4 (8 bf16) and
// storing one uint2 (8 e4m3); 8 group slots per 128-thread CTA.
//
// Launch: block 128, grid (M, Y, 1) with 1 <= Y <= K/128 (kiln::ops::fp8_quant_grid). CTA
// blockIdx.y owns groups [g0, g_end), gpc = ceil(L / Y); slot `sub` takes groups g0 + sub,
// g0 + sub + 8, ..., so any Y covers every group once. Needs x 16-byte and q 8-byte aligned.
#include "fp8_e4m3.cuh"

namespace {
constexpr unsigned HQ_THREADS = 128;
constexpr unsigned HQ_LANES = 16;                            // threads per group
constexpr unsigned HQ_ELEMS = kiln::fp8::GROUP / HQ_LANES;   // 8 bf16: one uint4 per thread
constexpr unsigned HQ_GROUPS_PER_CTA = HQ_THREADS / HQ_LANES;  // kiln::ops::FP8_QUANT_HOPPER_GROUPS_PER_CTA
// Why: a slot whose span passes 8 groups issues this many groups' loads before reducing any, so
// more bytes are in flight per thread. The host emulation in tests/test_fp8_reference.cpp walks the
// same passes.
constexpr unsigned HQ_UNROLL = 2;
// Why 12: at kiln's default grid each thread has one load in flight, so resident warps are the
// bytes in flight. 12 CTAs (48 warps) per SM caps registers at 40, which sm_90 meets without
// spills at HQ_UNROLL 2; HQ_UNROLL 4 needs 52 registers (9 CTAs) or spills.
constexpr unsigned HQ_MIN_CTAS_PER_SM = 12;
constexpr unsigned HQ_PASS_STRIDE = HQ_GROUPS_PER_CTA * kiln::fp8::GROUP;  // elements between a slot's groups

struct Bf16x8 {
  unsigned w[4];
};

// Why ld.global.nc.L1::no_allocate: x is read once; keep it out of L1 and off the coherent path.
__device__ __forceinline__ Bf16x8 load_stream(const unsigned short* p) {
  Bf16x8 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
      : "l"(p));
  return v;
}

// One thread's 8 elements of one group: the group max over the 16 lanes of `mask`, then 8 codes.
__device__ __forceinline__ void quantize_slice(const Bf16x8& v, unsigned mask, unsigned char* q, float* scale_out) {
  float f[HQ_ELEMS];
#pragma unroll
  for (unsigned j = 0; j < HQ_ELEMS / 2; ++j) {
    f[2 * j] = kiln::fp8::bf16_low(v.w[j]);
    f[2 * j + 1] = kiln::fp8::bf16_high(v.w[j]);
  }
  float absmax = fabsf(f[0]);
#pragma unroll
  for (unsigned j = 1; j < HQ_ELEMS; ++j) absmax = fmaxf(absmax, fabsf(f[j]));
#pragma unroll
  for (unsigned offset = HQ_LANES / 2; offset > 0; offset >>= 1)
    absmax = fmaxf(absmax, __shfl_xor_sync(mask, absmax, offset));

  const float scale = kiln::fp8::group_scale(absmax);
  unsigned pairs[HQ_ELEMS / 2];
#pragma unroll
  for (unsigned j = 0; j < HQ_ELEMS / 2; ++j)
    pairs[j] = kiln::fp8::e4m3x2(kiln::fp8::clamped_ratio(f[2 * j], scale),
                                 kiln::fp8::clamped_ratio(f[2 * j + 1], scale));
  uint2 out;
  out.x = pairs[0] | (pairs[1] << 16);
  out.y = pairs[2] | (pairs[3] << 16);
  *reinterpret_cast<uint2*>(q) = out;
  if (scale_out) *scale_out = scale;
}
}  // namespace

extern "C" __global__ __launch_bounds__(HQ_THREADS, HQ_MIN_CTAS_PER_SM) void per_token_group_quant_fp8_hopper(
    const unsigned short* __restrict__ x, unsigned char* __restrict__ q, float* __restrict__ scales,
    unsigned int k) {
  const unsigned sub = threadIdx.x / HQ_LANES;
  const unsigned lane = threadIdx.x % HQ_LANES;
  const unsigned groups = k / kiln::fp8::GROUP;
  // The span, as kiln::ops::fp8_quant_hopper_span computes it on the host.
  const unsigned gpc = groups / gridDim.y + (groups % gridDim.y != 0);
  const unsigned g0 = blockIdx.y * gpc;
  const unsigned g_end = g0 + gpc < groups ? g0 + gpc : groups;
  // Why a half-warp mask: a group's 16 lanes always run the same iterations, but the other
  // half-warp of the warp (the next slot) may run one fewer.
  const unsigned mask = 0xffffu << (threadIdx.x & 16u);

  // Why size_t: M * K passes 2^32 for large activations.
  const size_t row = blockIdx.x;
  const unsigned short* xs = x + row * k + lane * HQ_ELEMS;
  unsigned char* qs = q + row * k + lane * HQ_ELEMS;
  float* ss = scales + row * groups;

  // Slot `sub` owns groups g0 + sub + 8i < g_end; each pass takes HQ_UNROLL of them, loads first.
  // tests/test_fp8_reference.cpp ("the twin's work split ...") walks exactly this loop.
  for (unsigned g = g0 + sub; g < g_end; g += HQ_GROUPS_PER_CTA * HQ_UNROLL) {
    // The pass's groups sit at constant distances from this offset.
    const size_t at = static_cast<size_t>(g) * kiln::fp8::GROUP;
    Bf16x8 v[HQ_UNROLL];
#pragma unroll
    for (unsigned u = 0; u < HQ_UNROLL; ++u) {
      const unsigned gu = g + u * HQ_GROUPS_PER_CTA;
      if (gu < g_end) v[u] = load_stream(xs + at + u * HQ_PASS_STRIDE);
    }
#pragma unroll
    for (unsigned u = 0; u < HQ_UNROLL; ++u) {
      const unsigned gu = g + u * HQ_GROUPS_PER_CTA;
      if (gu < g_end) quantize_slice(v[u], mask, qs + at + u * HQ_PASS_STRIDE, lane == 0 ? ss + gu : nullptr);
    }
  }
}

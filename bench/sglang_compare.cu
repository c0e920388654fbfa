// kiln's twin beside SGLang's JIT kernel (bench/sglang_peer.cu) on one GPU, in one process, timed
// the same way (batches of 10 behind a spin, inputs rotated per launch over 200 MB; geometry_harness.cuh),
// with and without programmatic dependent launch, at issue 16's shapes. The device image has no
// SGLang, so issue 16's SGLang figures came from another H200 on another day; this puts both
// kernels on one clock. Each arm's bytes are compared with the twin's: SGLang's differ (fast-math
// division), and the count of codes and scales that differ is printed.
// Build and run: bench/sglang_compare.sh.
#include <iterator>

#include "geometry_harness.cuh"
#include "shape_sweep.cuh"
// The twin as kiln ships it; needs -I kernels_src/common for its include of fp8_e4m3.cuh.
#include "../kernels_src/hopper/fp8_act_quant_hopper.cu"
#include "sglang_peer.hpp"

namespace {

// kiln bench's empty kernel: grid 1, block 128, the twin's grid-dependency steps.
__global__ void empty_kernel() { kiln::pdl::enter_stream_order(); }

cudaLaunchConfig_t launch_config(unsigned blocks, unsigned threads, bool pdl, cudaLaunchAttribute& attribute) {
  attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.attrs = &attribute;
  config.numAttrs = pdl ? 1 : 0;
  return config;
}

double empty_us(bool pdl) {
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = launch_config(1, HQ_THREADS, pdl, attribute);
  return median_us_per_launch([&](int) { CHECK(cudaLaunchKernelEx(&config, empty_kernel)); }, 1);
}

// Candidates for the twin, each against the shipped one in the same process (issue 16: SGLang's
// kernel gains more from PDL at mid sizes). THREADS: CTA size. NAN_FREE: the group max taken with
// max.NaN, and a group without NaN skips the per-element NaN clamp (the family kernel's path from
// sm_90); a group with NaN takes the shipped path. EXACT false: x * (1 / scale) in place of the
// division, not byte-exact, to price exactness. PDL: 0 the shipped order (wait, trigger, then
// the index math), 1 the index math before the wait (SGLang's order, trigger after the wait), 2
// the trigger before the wait.
// max(a, b) of two bf16 pairs, NaN where either is (sm_80 and later): bf16 maxima are exact.
__device__ __forceinline__ unsigned max_keeping_nan_bf16x2(unsigned a, unsigned b) {
  unsigned m;
  asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(b));
  return m;
}

// The shipped path for a slice: the max dropping NaN, every code clamped.
__device__ __forceinline__ float clamped_codes(const unsigned (&words)[HQ_RUN / 2], unsigned mask, unsigned (&p)[HQ_RUN / 2]) {
  float f[HQ_RUN];
#pragma unroll
  for (unsigned j = 0; j < HQ_RUN / 2; ++j) {
    f[2 * j] = kiln::fp8::bf16_low(words[j]);
    f[2 * j + 1] = kiln::fp8::bf16_high(words[j]);
  }
  float absmax = kiln::fp8::max_magnitude<HQ_RUN>(f);
#pragma unroll
  for (unsigned offset = HQ_LANES / 2; offset > 0; offset >>= 1) absmax = fmaxf(absmax, __shfl_xor_sync(mask, absmax, offset));
  const kiln::fp8::GroupDivisor d = kiln::fp8::group_divisor(absmax);
  kiln::fp8::e4m3x2_group<HQ_RUN / 2>(f, d, p);
  return d.scale;
}

// MAX 0: the max over unpacked floats (max.NaN when NAN_FREE); 1: over packed bf16 pairs with
// max.NaN.bf16x2 (SGLang reduces packed pairs), the floats unpacked only for the codes, so a
// slice holds 8 registers, not 16, through the shuffles.
template <unsigned THREADS, bool NAN_FREE, bool EXACT, int MAX, class Load>
__device__ __forceinline__ void candidate_groups(const unsigned short* __restrict__ x, unsigned char* __restrict__ q,
                                                 float* __restrict__ scales, unsigned long long groups,
                                                 unsigned long long g, Load load) {
  const unsigned lane = threadIdx.x % HQ_LANES;
  const unsigned mask = 0xffu << (threadIdx.x & 24u);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * (THREADS / HQ_LANES);
  for (; g < groups; g += stride) {
    const unsigned long long at = g * kiln::fp8::GROUP + lane * HQ_RUN;
    uint4 v[HQ_VECS];
#pragma unroll
    for (unsigned w = 0; w < HQ_VECS; ++w) v[w] = load(x + at + w * HQ_VEC);
    const unsigned words[HQ_RUN / 2] = {v[0].x, v[0].y, v[0].z, v[0].w, v[1].x, v[1].y, v[1].z, v[1].w};
    unsigned p[HQ_RUN / 2];
    float scale;
    if constexpr (MAX == 1) {
      unsigned m2 = words[0] & 0x7fff7fffu;
#pragma unroll
      for (unsigned j = 1; j < HQ_RUN / 2; ++j) m2 = max_keeping_nan_bf16x2(m2, words[j] & 0x7fff7fffu);
      float absmax = kiln::fp8::fmax_keeping_nan(kiln::fp8::bf16_low(m2), kiln::fp8::bf16_high(m2));
#pragma unroll
      for (unsigned offset = HQ_LANES / 2; offset > 0; offset >>= 1)
        absmax = kiln::fp8::fmax_keeping_nan(absmax, __shfl_xor_sync(mask, absmax, offset));
      if (absmax == absmax) {
        const kiln::fp8::GroupDivisor d = kiln::fp8::group_divisor(absmax);
        if (d.by_reciprocal) {
#pragma unroll
          for (unsigned j = 0; j < HQ_RUN / 2; ++j)
            p[j] = kiln::fp8::e4m3x2(kiln::fp8::ratio_by_reciprocal(kiln::fp8::bf16_low(words[j]), d.scale, d.recip),
                                     kiln::fp8::ratio_by_reciprocal(kiln::fp8::bf16_high(words[j]), d.scale, d.recip));
          scale = d.scale;
        } else {
          scale = clamped_codes(words, mask, p);
        }
      } else {
        scale = clamped_codes(words, mask, p);
      }
    } else {
    float f[HQ_RUN];
#pragma unroll
    for (unsigned j = 0; j < HQ_RUN / 2; ++j) {
      f[2 * j] = kiln::fp8::bf16_low(words[j]);
      f[2 * j + 1] = kiln::fp8::bf16_high(words[j]);
    }
    float absmax = kiln::fp8::max_magnitude<HQ_RUN, NAN_FREE>(f);
#pragma unroll
    for (unsigned offset = HQ_LANES / 2; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(mask, absmax, offset);
      absmax = NAN_FREE ? kiln::fp8::fmax_keeping_nan(absmax, other) : fmaxf(absmax, other);
    }
    if (NAN_FREE && absmax == absmax) {
      const kiln::fp8::GroupDivisor d = kiln::fp8::group_divisor(absmax);
      if (EXACT) {
        kiln::fp8::e4m3x2_group<HQ_RUN / 2, false, true>(f, d, p);
      } else {
#pragma unroll
        for (unsigned j = 0; j < HQ_RUN / 2; ++j) p[j] = kiln::fp8::e4m3x2(f[2 * j] * d.recip, f[2 * j + 1] * d.recip);
      }
      scale = d.scale;
    } else {
      if (NAN_FREE) {
        absmax = kiln::fp8::max_magnitude<HQ_RUN>(f);
#pragma unroll
        for (unsigned offset = HQ_LANES / 2; offset > 0; offset >>= 1)
          absmax = fmaxf(absmax, __shfl_xor_sync(mask, absmax, offset));
      }
      const kiln::fp8::GroupDivisor d = kiln::fp8::group_divisor(absmax);
      kiln::fp8::e4m3x2_group<HQ_RUN / 2>(f, d, p);
      scale = d.scale;
    }
    }
    *reinterpret_cast<uint4*>(q + at) =
        make_uint4(p[0] | (p[1] << 16), p[2] | (p[3] << 16), p[4] | (p[5] << 16), p[6] | (p[7] << 16));
    if (lane == 0) scales[g] = scale;
  }
}

template <unsigned THREADS, bool NAN_FREE, bool EXACT, int PDL, int MAX = 0>
__global__ __launch_bounds__(THREADS, 2048 / THREADS) void twin_candidate(const unsigned short* __restrict__ x,
                                                                       unsigned char* __restrict__ q,
                                                                       float* __restrict__ scales, unsigned k,
                                                                       unsigned m) {
  if constexpr (PDL == 0) kiln::pdl::enter_stream_order();
  if constexpr (PDL == 2) kiln::pdl::allow_dependent_grid();
  const unsigned long long groups = static_cast<unsigned long long>(m) * (k / kiln::fp8::GROUP);
  const unsigned long long g = static_cast<unsigned long long>(blockIdx.x) * (THREADS / HQ_LANES) + threadIdx.x / HQ_LANES;
  if constexpr (PDL == 1) kiln::pdl::enter_stream_order();
  if constexpr (PDL == 2) kiln::pdl::wait_for_prior_grid();
  if (groups < HQ_NO_ALLOCATE_BELOW)
    candidate_groups<THREADS, NAN_FREE, EXACT, MAX>(x, q, scales, groups, g, [](const unsigned short* p) { return load_no_allocate(p); });
  else
    candidate_groups<THREADS, NAN_FREE, EXACT, MAX>(x, q, scales, groups, g, [](const unsigned short* p) { return load_stream(p); });
}

using TwinKernel = void (*)(const unsigned short*, unsigned char*, float*, unsigned, unsigned);

void twin(const unsigned short* x, unsigned char* q, float* s, unsigned m, unsigned k, bool pdl,
          TwinKernel kernel = per_token_group_quant_fp8_hopper, unsigned threads = HQ_THREADS) {
  const unsigned long long groups = static_cast<unsigned long long>(m) * (k / 128);
  const unsigned groups_per_cta = threads / HQ_LANES;
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config =
      launch_config(unsigned((groups + groups_per_cta - 1) / groups_per_cta), threads, pdl, attribute);
  CHECK(cudaLaunchKernelEx(&config, kernel, x, q, s, k, m));
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const double ceiling = copy_ceiling_gbps();
  std::printf("copy ceiling %.0f GB/s (1 GiB device-to-device copy)\n", ceiling);
  std::printf("empty kernel: %.2f us, with PDL %.2f us\n", empty_us(false), empty_us(true));
  // Issue 16's table, then the bench grid's shapes with M*K >= 32M that sat lowest against the ceiling.
  const unsigned shapes[][2] = {{1, 7168},     {16, 7168},     {512, 7168},   {2048, 7168},
                                {8192, 7168},  {32768, 7168},  {16384, 18432}, {128, 7168},
                                {1, 2048},     {16, 18432},    {4576, 7168},  {16384, 2048},
                                {2048, 18432}, {8192, 5120},   {32768, 2048}};
  // Why every arm twice, interleaved: a drift of the GPU's clock within a shape shows as a gap
  // between an arm's two rows instead of as a difference between the kernels.
  for_each_shape(shapes, std::size(shapes), ceiling, [&](unsigned m, unsigned k, size_t, auto& timed, auto& report) {
    for (int round = 0; round < 2; ++round) {
      for (bool pdl : {false, true}) {
        const auto arm = [&](const char* name, TwinKernel kernel, unsigned threads, bool reference = false) {
          char label[64];
          std::snprintf(label, sizeof label, "%s%s", name, pdl ? ", PDL" : "");
          report(label, timed([&](auto x, auto q, auto s) { twin(x, q, s, m, k, pdl, kernel, threads); }, reference));
        };
        arm("kiln twin", per_token_group_quant_fp8_hopper, HQ_THREADS, round == 0 && !pdl);
        arm("twin copy", twin_candidate<128, false, true, 0>, 128);
        arm("twin NaN-free", twin_candidate<128, true, true, 0>, 128);
        arm("packed max", twin_candidate<128, true, true, 0, 1>, 128);
        if (pdl) {
          arm("packed max, math first", twin_candidate<128, true, true, 1, 1>, 128);
          arm("packed max, trigger first", twin_candidate<128, true, true, 2, 1>, 128);
        }
        arm("packed max, 256 threads", twin_candidate<256, true, true, 0, 1>, 256);
        arm("NaN-free, x*(1/scale)", twin_candidate<128, true, false, 0>, 128);
        report(pdl ? "SGLang 0.5.23 JIT, PDL" : "SGLang 0.5.23 JIT", timed([&](auto x, auto q, auto s) {
                 CHECK(sglang_quant_bf16_e4m3_g128(x, q, s, m, k, pdl, nullptr));
               }, false));
      }
    }
  });
  std::printf("\nempty kernel again: %.2f us, with PDL %.2f us\n", empty_us(false), empty_us(true));
  return 0;
}

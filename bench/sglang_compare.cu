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

// The twin's body in SGLang's frame: no loop (the grid covers every group; 32-bit indices, so
// only for M * K < 2^32), a slot past the last group exits. PDL 0: wait and trigger first
// (shipped); 1: the index math first, as SGLang's kernel.
template <int PDL>
__global__ __launch_bounds__(HQ_THREADS, KILN_HQ_MIN_CTAS) void twin_one_pass(const unsigned short* __restrict__ x,
                                                                           unsigned char* __restrict__ q,
                                                                           float* __restrict__ scales, unsigned k,
                                                                           unsigned m) {
  if constexpr (PDL == 0) kiln::pdl::enter_stream_order();
  const unsigned groups = m * (k / kiln::fp8::GROUP);
  const unsigned g = blockIdx.x * HQ_GROUPS_PER_CTA + threadIdx.x / HQ_LANES;
  const unsigned lane = threadIdx.x % HQ_LANES;
  const unsigned at = g * kiln::fp8::GROUP + lane * HQ_RUN;
  const unsigned mask = 0xffu << (threadIdx.x & 24u);
  if constexpr (PDL == 1) kiln::pdl::enter_stream_order();
  if (g >= groups) return;
  uint4 v[HQ_VECS];
  if (groups < HQ_NO_ALLOCATE_BELOW) {
#pragma unroll
    for (unsigned w = 0; w < HQ_VECS; ++w) v[w] = load_no_allocate(x + at + w * HQ_VEC);
  } else {
#pragma unroll
    for (unsigned w = 0; w < HQ_VECS; ++w) v[w] = load_stream(x + at + w * HQ_VEC);
  }
  quantize_run(v, mask, q + at, lane == 0 ? scales + g : nullptr);
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
        struct Arm {
          const char* name;
          TwinKernel kernel;  // null: SGLang's kernel
          unsigned threads;
          bool pdl_only;
        };
        const Arm arms[] = {{"kiln twin", per_token_group_quant_fp8_hopper, HQ_THREADS, false},
                            {"one pass", twin_one_pass<0>, 128, false},
                            {"one pass, math first", twin_one_pass<1>, 128, true},
                            {"SGLang 0.5.23 JIT", nullptr, 0, false}};
        // Why the second round runs the arms in reverse: a kernel's rows then come from both ends
        // of the order, so an effect of the place in the order shows as a gap between its rows.
        for (size_t i = 0; i < std::size(arms); ++i) {
          const Arm& arm = arms[round == 0 ? i : std::size(arms) - 1 - i];
          if (arm.pdl_only && !pdl) continue;
          char label[64];
          std::snprintf(label, sizeof label, "%s%s", arm.name, pdl ? ", PDL" : "");
          const bool reference = round == 0 && !pdl && i == 0;
          report(label, timed([&](auto x, auto q, auto s) {
                   if (arm.kernel)
                     twin(x, q, s, m, k, pdl, arm.kernel, arm.threads);
                   else
                     CHECK(sglang_quant_bf16_e4m3_g128(x, q, s, m, k, pdl, nullptr));
                 }, reference));
        }
      }
    }
  });
  std::printf("\nempty kernel again: %.2f us, with PDL %.2f us\n", empty_us(false), empty_us(true));
  return 0;
}

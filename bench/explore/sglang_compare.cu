// kiln's twin (and, at the small shapes where kiln's pick runs it, the seed's shared kernel) beside
// SGLang's JIT kernel (bench/explore/sglang_peer.cu) on one GPU, in one process, timed
// the same way (batches of 10 behind a spin, inputs rotated per launch over 200 MB; geometry_harness.cuh),
// with and without programmatic dependent launch, at issue 16's shapes. The device image has no
// SGLang, so issue 16's SGLang figures came from another H200 on another day; this puts both
// kernels on one clock. Each arm's bytes are compared with the twin's: SGLang's differ (fast-math
// division), and the count of codes and scales that differ is printed.
// Build and run: bench/explore/sglang_compare.sh.
#include <iterator>

#include "geometry_harness.cuh"
#include "shape_sweep.cuh"
// The twin as kiln ships it; needs -I kernels_src/common for its include of fp8_e4m3.cuh.
#include "../../kernels_src/hopper/fp8_act_quant_hopper.cu"
#include "../../kernels_src/common/per_token_group_quant_fp8.cu"
#include "sglang_peer.hpp"

namespace {

// kiln-bench's empty kernel: grid 1, block 128, the twin's grid-dependency steps.
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

void twin(const unsigned short* x, unsigned char* q, float* s, unsigned m, unsigned k, bool pdl) {
  const unsigned long long groups = static_cast<unsigned long long>(m) * (k / 128);
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config =
      launch_config(unsigned((groups + HQ_GROUPS_PER_CTA - 1) / HQ_GROUPS_PER_CTA), HQ_THREADS, pdl, attribute);
  CHECK(cudaLaunchKernelEx(&config, per_token_group_quant_fp8_hopper, x, q, s, k, m));
}

// The seed's shared kernel as kiln launches it: one 128-thread CTA per group, the _pdl entry with PDL.
void shared(const unsigned short* x, unsigned char* q, float* s, unsigned m, unsigned k, bool pdl) {
  cudaLaunchAttribute attribute;
  cudaLaunchConfig_t config = launch_config(m, 128, pdl, attribute);
  config.gridDim.y = k / 128;
  if (pdl)
    CHECK(cudaLaunchKernelEx(&config, per_token_group_quant_fp8_pdl, x, q, s, k));
  else
    CHECK(cudaLaunchKernelEx(&config, per_token_group_quant_fp8, x, q, s, k));
}

// Where kiln's pick can run the shared kernel on an sm_90 part: grids below the twin's floor.
constexpr unsigned SHARED_ARM_MAX_M = 128;

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
        // Why the second round puts SGLang's kernel first: each kernel then has a row from either
        // place in the order, so an effect of the place shows as a gap between its two rows.
        for (bool sglang : {round == 1, round == 0}) {
          if (sglang)
            report(pdl ? "SGLang 0.5.23 JIT, PDL" : "SGLang 0.5.23 JIT", timed([&](auto x, auto q, auto s) {
                     CHECK(sglang_quant_bf16_e4m3_g128(x, q, s, m, k, pdl, nullptr));
                   }, false));
          else
            report(pdl ? "kiln twin, PDL" : "kiln twin",
                   timed([&](auto x, auto q, auto s) { twin(x, q, s, m, k, pdl); }, round == 0 && !pdl));
        }
        if (m <= SHARED_ARM_MAX_M)
          report(pdl ? "kiln shared, PDL" : "kiln shared",
                 timed([&](auto x, auto q, auto s) { shared(x, q, s, m, k, pdl); }, false));
      }
    }
  });
  std::printf("\nempty kernel again: %.2f us, with PDL %.2f us\n", empty_us(false), empty_us(true));
  return 0;
}

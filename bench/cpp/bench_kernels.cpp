#include "bench_kernels.hpp"

namespace kiln::bench {

namespace {

constexpr std::string_view SOURCE = R"cuda(
#include "grid_dependency.cuh"

extern "C" __global__ void kiln_bench_empty(const unsigned short*, unsigned char*, float*, unsigned int) {}

// The empty kernel as a PDL launch of kiln's runs it: the grid-dependency steps every kiln
// quantizer takes at its start, and nothing else.
extern "C" __global__ void kiln_bench_empty_pdl(const unsigned short*, unsigned char*, float*, unsigned int) {
  kiln::pdl::enter_stream_order();
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void kiln_bench_spin(unsigned long long ns) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) __nanosleep(500);
}

__device__ __forceinline__ unsigned int mix(unsigned long long v) {
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  v *= 0xc4ceb9fe1a85ec53ull;
  v ^= v >> 33;
  return static_cast<unsigned int>(v);
}

// bf16: sign bit 15, exponent bits 14..7, mantissa bits 6..0. Each 128-element group gets a base
// exponent in 107..147 (2^-20..2^20); its elements sit up to 7 binades below that.
extern "C" __global__ void kiln_bench_fill(unsigned short* x, unsigned long long n, unsigned int seed) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const unsigned int group = mix((i / 128) * 0x9E3779B97F4A7C15ull ^ seed);
    const unsigned int element = mix(i ^ (static_cast<unsigned long long>(seed) << 32));
    const unsigned int exponent = 107 + group % 41 - (element >> 29);
    x[i] = static_cast<unsigned short>((element & 0x8000u) | (exponent << 7) | (element & 0x7fu));
  }
}
)cuda";

}  // namespace

const KernelSource& bench_kernel_source() {
  static const KernelSource source{std::string(BENCH_MODULE),
                                   "common",
                                   {std::string(BENCH_EMPTY), std::string(BENCH_EMPTY_PDL), std::string(BENCH_SPIN), std::string(BENCH_FILL)},
                                   SOURCE,
                                   ""};
  return source;
}

}  // namespace kiln::bench

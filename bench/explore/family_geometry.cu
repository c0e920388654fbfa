// Exploration harness for the quantizers' geometry and for what the PDL instructions cost (kiln
// issues 15 and 16): one kernel, one variant and one geometry per build, chosen with -D:
//   KILN_BENCH_KERNEL 0: the family (per_token_group_quant.cu) with its KILN_Q_* parameters and
//                     KILN_Q_ITEMS (groups per slot); 1: the shared kernel; 2: the Hopper twin
//   KILN_NO_GRID_DEPENDENCY  the kernel without griddepcontrol (kernels_src/common/grid_dependency.cuh)
// bench/explore/family_geometry.sh builds the set (nvcc -O3 -std=c++17 -arch=sm_90a -I kernels_src/common -I src)
// and runs it on the GPU. Each run prints, per shape, the median time per launch, GB/s, the fraction
// of the copy ceiling and an FNV-1a hash of q and the scales, so builds of one variant can be compared
// byte for byte. Grids are kiln's (kiln::ops::GroupQuant::grid, fp8_quant_grid) for the geometry built.
// Set FAMILY_GEOMETRY_ONE_ALLOCATION and FAMILY_GEOMETRY_COPY to change how buffers are allocated and
// to time a copy beside each point (run(), below).
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "geometry_harness.cuh"
#include "ops/tile_divisor.hpp"

#ifndef KILN_BENCH_KERNEL
#define KILN_BENCH_KERNEL 0
#endif
#if KILN_BENCH_KERNEL == 0
#include "../../kernels_src/common/per_token_group_quant.cu"
#elif KILN_BENCH_KERNEL == 1
#include "../../kernels_src/common/per_token_group_quant_fp8.cu"
#else
#include "../../kernels_src/hopper/fp8_act_quant_hopper.cu"
#endif

namespace {

#if KILN_BENCH_KERNEL == 0
constexpr unsigned BENCH_GROUP = KILN_Q_GROUP;
constexpr unsigned BENCH_IN_BYTES = IN_BYTES;
constexpr bool BENCH_SILU = KILN_Q_SILU != 0;
constexpr bool BENCH_FP16 = KILN_Q_IN == 1;
#else
constexpr unsigned BENCH_GROUP = 128;
constexpr unsigned BENCH_IN_BYTES = 2;
constexpr bool BENCH_SILU = false;
constexpr bool BENCH_FP16 = false;
#endif

std::string built() {
  char text[160];
#if KILN_BENCH_KERNEL == 0
  std::snprintf(text, sizeof text, "family in%d g%d out%d scales%d ue8m0 %d silu %d items %u", KILN_Q_IN, KILN_Q_GROUP,
                KILN_Q_OUT, KILN_Q_SCALES, KILN_Q_UE8M0, KILN_Q_SILU, KILN_Q_ITEMS);
#else
  std::snprintf(text, sizeof text, "%s", KILN_BENCH_KERNEL == 1 ? "shared" : "twin");
#endif
#ifdef KILN_NO_GRID_DEPENDENCY
  return std::string(text) + ", no griddepcontrol";
#else
  return std::string(text) + ", griddepcontrol";
#endif
}

// Scale bytes as the layout stores them.
size_t scale_bytes(size_t m, size_t groups) {
#if KILN_BENCH_KERNEL == 0 && KILN_Q_SCALES == 3
  return (groups + 3) / 4 * ((m + 3) / 4 * 4) * 4;
#elif KILN_BENCH_KERNEL == 0 && KILN_Q_SCALES == 2
  return groups * ((m + 3) / 4 * 4) * 4;
#else
  return groups * m * 4;
#endif
}

// Normal values whose groups span 2^-20..2^19 (fp16: 2^-12..2^13), so scales vary, in the input's
// type: a 4 Mi-element pattern repeated (drawing every element of a 600 M-element SiLU input took
// seconds per shape). Why fp16 has its own span: past 2^15 most groups held inf and took the
// kernel's true-division path, which timed a case serving stacks do not send.
std::vector<unsigned char> random_input(size_t elems, std::mt19937& rng) {
  const size_t pattern = std::min<size_t>(elems, size_t(1) << 22);
  std::vector<unsigned char> bytes(elems * BENCH_IN_BYTES);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int lowest_exponent = BENCH_FP16 ? -12 : -20;
  const int exponents = BENCH_FP16 ? 26 : 40;
  for (size_t i = 0; i < pattern; ++i) {
    const float f = normal(rng) * std::ldexp(1.0f, int(i / BENCH_GROUP % exponents) + lowest_exponent);
    if (BENCH_IN_BYTES == 4) {
      std::memcpy(&bytes[i * 4], &f, 4);
    } else if (BENCH_FP16) {
      const __half h = __float2half_rn(f);
      std::memcpy(&bytes[i * 2], &h, 2);
    } else {
      unsigned u;
      std::memcpy(&u, &f, 4);
      const unsigned short b = static_cast<unsigned short>(u >> 16);
      std::memcpy(&bytes[i * 2], &b, 2);
    }
  }
  for (size_t at = pattern; at < elems; at += pattern)
    std::memcpy(&bytes[at * BENCH_IN_BYTES], bytes.data(), std::min(pattern, elems - at) * BENCH_IN_BYTES);
  return bytes;
}

unsigned long long fnv1a(const std::vector<unsigned char>& bytes, unsigned long long h = 1469598103934665603ull) {
  for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

struct Launch {
  dim3 grid;
  unsigned threads;
};

Launch geometry(unsigned m, unsigned k) {
  const unsigned groups = k / BENCH_GROUP;
#if KILN_BENCH_KERNEL == 0
  unsigned long long ctas;
  if (TILED) {
    const unsigned long long rows = PACKED ? (m + 3ull) / 4 * 4 : m;
    const unsigned long long span = PACKED ? (groups + 3ull) / 4 * 4 : groups;
    ctas = (rows + TILE_ROWS * KILN_Q_ITEMS - 1) / (TILE_ROWS * KILN_Q_ITEMS) * ((span + TILE_GROUPS - 1) / TILE_GROUPS);
  } else {
    const unsigned long long per_cta = GROUPS_PER_CTA * KILN_Q_ITEMS;
    ctas = (static_cast<unsigned long long>(m) * groups + per_cta - 1) / per_cta;
  }
  return {dim3(static_cast<unsigned>(ctas)), THREADS};
#elif KILN_BENCH_KERNEL == 1
  return {dim3(m, groups), 128};
#else
  return {dim3(static_cast<unsigned>((static_cast<unsigned long long>(m) * groups + 15) / 16)), 128};
#endif
}

void run(unsigned m, unsigned k, double ceiling) {
  const size_t elems = size_t(m) * k, groups = k / BENCH_GROUP;
  const size_t x_bytes = elems * BENCH_IN_BYTES * (BENCH_SILU ? 2 : 1), s_bytes = scale_bytes(m, groups);
  const size_t set_bytes = x_bytes + elems + s_bytes;
  const int sets = std::max<int>(2, int((200u << 20) / set_bytes) + 1);
  std::mt19937 rng(m ^ k);
  const std::vector<unsigned char> host = random_input(x_bytes / BENCH_IN_BYTES, rng);
  std::vector<void*> x(sets), s(sets);
  std::vector<unsigned char*> q(sets);
  // FAMILY_GEOMETRY_ONE_ALLOCATION=1: each buffer's sets in one allocation, as kiln-bench has them.
  const bool one_allocation = std::getenv("FAMILY_GEOMETRY_ONE_ALLOCATION") != nullptr;
  std::vector<void*> owned;
  const auto allocate = [&](size_t bytes) {
    void* p;
    CHECK(cudaMalloc(&p, bytes));
    owned.push_back(p);
    return static_cast<unsigned char*>(p);
  };
  const auto rounded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  unsigned char* x_all = one_allocation ? allocate(rounded(x_bytes) * sets) : nullptr;
  unsigned char* q_all = one_allocation ? allocate(rounded(elems) * sets) : nullptr;
  unsigned char* s_all = one_allocation ? allocate(rounded(s_bytes) * sets) : nullptr;
  for (int i = 0; i < sets; ++i) {
    x[i] = one_allocation ? x_all + i * rounded(x_bytes) : allocate(x_bytes);
    q[i] = one_allocation ? q_all + i * rounded(elems) : allocate(elems);
    s[i] = one_allocation ? s_all + i * rounded(s_bytes) : allocate(s_bytes);
    CHECK(cudaMemcpy(x[i], host.data(), x_bytes, cudaMemcpyHostToDevice));
  }
  const Launch shape = geometry(m, k);
#if KILN_BENCH_KERNEL == 0
  const size_t span = PACKED ? (groups + 3) / 4 * 4 : groups;
  const auto tiles_per_row = static_cast<std::uint32_t>(TILED ? (span + TILE_GROUPS - 1) / TILE_GROUPS : 1);
  const kiln::ops::TileDivisor divisor = kiln::ops::TileDivisor::of_valid(tiles_per_row);
  const TileDivisor tiles{divisor.multiplier, divisor.shift};
#endif
  const auto launch = [&](int set) {
#if KILN_BENCH_KERNEL == 0
    const unsigned scale_rows = KILN_Q_SCALES >= 2 ? (m + 3) / 4 * 4 : m;
    per_token_group_quant<<<shape.grid, shape.threads>>>(x[set], q[set], s[set], m, static_cast<unsigned>(groups),
                                                         BENCH_SILU ? 2ull * k : k, scale_rows, 1e-10f, tiles);
#elif KILN_BENCH_KERNEL == 1
    per_token_group_quant_fp8<<<shape.grid, shape.threads>>>(static_cast<const unsigned short*>(x[set]), q[set],
                                                             static_cast<float*>(s[set]), k);
#else
    per_token_group_quant_fp8_hopper<<<shape.grid, shape.threads>>>(static_cast<const unsigned short*>(x[set]), q[set],
                                                                     static_cast<float*>(s[set]), k, m);
#endif
  };
  CHECK(cudaMemset(q[0], 0xCD, elems));
  CHECK(cudaMemset(s[0], 0xCD, s_bytes));
  launch(0);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<unsigned char> q_host(elems), s_host(s_bytes);
  CHECK(cudaMemcpy(q_host.data(), q[0], elems, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(s_host.data(), s[0], s_bytes, cudaMemcpyDeviceToHost));
  const double us = median_us_per_launch(launch, sets);
  const double gbps = double(set_bytes) / (us * 1e-6) / 1e9;
  std::printf("%-7u %-6u %10.2f %8.0f %6.1f%%  %016llx", m, k, us, gbps, 100 * gbps / ceiling,
              fnv1a(s_host, fnv1a(q_host)));
  // FAMILY_GEOMETRY_COPY=1: a copy of x's bytes between two of this run's own buffers, timed alike,
  // so a slow point can be told apart from slow memory under it. Every set holds the same input,
  // so the copies leave x as it was.
  if (std::getenv("FAMILY_GEOMETRY_COPY")) {
    const double copy_us = median_us_per_launch(
        [&](int set) { CHECK(cudaMemcpyAsync(x[(set + 1) % sets], x[set], x_bytes, cudaMemcpyDeviceToDevice)); }, sets);
    std::printf("  copy of x %.2f us %.1f%%", copy_us, 100 * 2.0 * x_bytes / (copy_us * 1e-6) / 1e9 / ceiling);
  }
  std::printf("\n");
  for (void* p : owned) CHECK(cudaFree(p));
}

}  // namespace

int main(int argc, char** argv) {
  // Shapes: pairs M K on the command line, or the default set.
  std::vector<unsigned> shapes;
  for (int i = 1; i < argc; ++i) shapes.push_back(static_cast<unsigned>(std::strtoul(argv[i], nullptr, 10)));
  if (shapes.empty()) shapes = {16, 7168, 2048, 7168, 8192, 7168, 32768, 7168, 16384, 18432};
  if (shapes.size() % 2 != 0) {
    std::fprintf(stderr, "family_geometry: shapes come as pairs M K\n");
    return 2;
  }
  const double ceiling = copy_ceiling_gbps();
  std::printf("\n== %s (copy ceiling %.0f GB/s)\n%-7s %-6s %10s %8s %7s  %s\n", built().c_str(), ceiling, "M", "K", "us",
              "GB/s", "%ceil", "hash of q and scales");
  for (size_t i = 0; i < shapes.size(); i += 2) run(shapes[i], shapes[i + 1], ceiling);
  return 0;
}

// What the kernel exploration harnesses (bench/explore/twin_geometry.cu, bench/explore/family_geometry.cu) share:
// checked CUDA calls, the median, the copy ceiling and timed batches over rotated buffers.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                               \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device-to-device copy of 1 GiB, bytes read plus written, median of 10, in GB/s.
static double copy_ceiling_gbps() {
  const size_t copy_bytes = size_t(1) << 30;
  void *from, *to;
  CHECK(cudaMalloc(&from, copy_bytes));
  CHECK(cudaMalloc(&to, copy_bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms_each;
  for (int i = 0; i < 12; ++i) {
    CHECK(cudaEventRecord(e0));
    CHECK(cudaMemcpyAsync(to, from, copy_bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 2) ms_each.push_back(ms);
  }
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  CHECK(cudaFree(from));
  CHECK(cudaFree(to));
  return 2.0 * copy_bytes / (median(ms_each) * 1e-3) / 1e9;
}

// Holds the stream for about `ns` nanoseconds of the GPU's clock.
__global__ void harness_spin(unsigned long long ns) {
  const unsigned long long start = clock64();
  while (clock64() - start < ns * 2) {  // Why 2: about 2 clocks per ns at the H200's ~1.98 GHz
  }
}

// Median microseconds per launch of `launch(set)`: batches of `per_batch` launches between events,
// the buffer set rotating per launch over sets spanning 200 MB (so no launch reads what an earlier
// one left in L2, as kiln-bench's arms), warm-up dropped. Why per launch: rotating per batch let a
// batch's last nine launches re-read its first one's input, which fits in L2 at mid sizes: the twin
// took 11.80 us at 2048 x 7168 here and 14.02 in kiln-bench (H200).
// Why a spin ahead of each batch: the host needs a few us per launch, more than a small shape's
// kernel; queued behind the spin, the batch's launches run back to back and the GPU time is timed.
template <class Launch>
static double median_us_per_launch(Launch launch, int sets, int batches = 30, int per_batch = 10) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> us;
  for (int i = 0; i < batches; ++i) {
    harness_spin<<<1, 1>>>(20000ull * per_batch);
    CHECK(cudaEventRecord(e0));
    for (int r = 0; r < per_batch; ++r) launch((i * per_batch + r) % sets);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 3) us.push_back(ms * 1e3f / per_batch);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return median(us);
}

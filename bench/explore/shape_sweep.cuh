// The shape sweep the exploration harnesses share (bench/explore/twin_geometry.cu, bench/explore/sglang_compare.cu):
// per shape, buffer sets of random bf16 spanning 200 MB, each candidate's bytes checked against the
// reference launch's, then timed as kiln-bench times its arms (geometry_harness.cuh).
#pragma once
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "geometry_harness.cuh"

// Normal bf16 (truncated from fp32) whose 128-element groups span 2^-20..2^19, so group scales vary.
static std::vector<unsigned short> random_bf16(size_t elems, std::mt19937& rng) {
  std::vector<unsigned short> host(elems);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (size_t i = 0; i < elems; ++i) {
    float f = nd(rng) * std::ldexp(1.0f, int(i / 128 % 40) - 20);
    unsigned u;
    std::memcpy(&u, &f, 4);
    host[i] = static_cast<unsigned short>(u >> 16);
  }
  return host;
}

struct Timed {
  double us;
  size_t codes_differ = 0, scales_differ = 0;  // against the reference launch's bytes
  bool same() const { return codes_differ == 0 && scales_differ == 0; }
};

// Per shape: fresh buffer sets spanning 200 MB of random bf16, then `body(m, k, groups, timed,
// report)`. `timed(launch, reference)` checks the launch's bytes (the first, reference launch's
// are kept) and times it; `report(name, timed)` prints one row.
template <class Body>
static void for_each_shape(const unsigned (*shapes)[2], size_t shape_count, double ceiling, Body body) {
  std::printf("\n%-26s %-30s %9s %9s %7s %s\n", "M x K", "kernel", "us", "GB/s", "%ceil", "bytes");
  for (size_t si = 0; si < shape_count; ++si) {
    const unsigned m = shapes[si][0], k = shapes[si][1];
    const size_t elems = size_t(m) * k, groups = elems / 128;
    const size_t set_bytes = elems * 3 + groups * 4;
    const int sets = std::max<int>(2, int((200u << 20) / set_bytes) + 1);
    std::vector<unsigned short*> xin(sets);
    std::vector<unsigned char*> qout(sets);
    std::vector<float*> sout(sets);
    std::mt19937 rng(m ^ k);
    const std::vector<unsigned short> host = random_bf16(elems, rng);
    for (int i = 0; i < sets; ++i) {
      CHECK(cudaMalloc(&xin[i], elems * 2));
      CHECK(cudaMalloc(&qout[i], elems));
      CHECK(cudaMalloc(&sout[i], groups * 4));
      CHECK(cudaMemcpy(xin[i], host.data(), elems * 2, cudaMemcpyHostToDevice));
    }
    std::vector<unsigned char> ref_q(elems), got_q(elems);
    std::vector<float> ref_s(groups), got_s(groups);
    const auto timed = [&](auto&& launch_on_set, bool reference) {
      const auto launch = [&](int b) { launch_on_set(xin[b], qout[b], sout[b]); };
      CHECK(cudaMemset(qout[0], 0xCD, elems));
      CHECK(cudaMemset(sout[0], 0xFF, groups * 4));
      launch(0);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      Timed result{0};
      if (reference) {
        CHECK(cudaMemcpy(ref_q.data(), qout[0], elems, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(ref_s.data(), sout[0], groups * 4, cudaMemcpyDeviceToHost));
      } else {
        CHECK(cudaMemcpy(got_q.data(), qout[0], elems, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(got_s.data(), sout[0], groups * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < elems; ++i) result.codes_differ += got_q[i] != ref_q[i];
        for (size_t g = 0; g < groups; ++g)
          result.scales_differ += std::memcmp(&got_s[g], &ref_s[g], sizeof(float)) != 0;
      }
      result.us = median_us_per_launch(launch, sets);
      return result;
    };
    const auto report = [&](const char* name, Timed r) {
      const double gbs = double(set_bytes) / (r.us * 1e-6) / 1e9;
      char shape_text[32];
      std::snprintf(shape_text, sizeof shape_text, "%u x %u", m, k);
      std::printf("%-26s %-30s %9.2f %9.0f %6.1f%% ", shape_text, name, r.us, gbs, 100 * gbs / ceiling);
      if (r.same())
        std::printf("same\n");
      else
        std::printf("DIFFER (%zu of %zu codes, %zu of %zu scales)\n", r.codes_differ, elems, r.scales_differ, groups);
    };
    body(m, k, groups, timed, report);
    for (int i = 0; i < sets; ++i) {
      CHECK(cudaFree(xin[i]));
      CHECK(cudaFree(qout[i]));
      CHECK(cudaFree(sout[i]));
    }
  }
}

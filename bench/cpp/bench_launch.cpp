// kiln's per-call costs on a loaded device: a memory-hit try_kernel, and a launch through
// CudaBackend::launch against a raw cuLaunchKernel of the same binary.
#include "bench_device.hpp"
#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "driver/driver_check.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::bench {

namespace {

/// ns per try_kernel of the loaded shared module, median of 3 passes; results folded into a sink.
double memory_hit_ns(GpuSession& gpu, std::uint64_t calls) {
  GpuBackend& backend = gpu.backend();
  std::uint64_t sink = 0;
  std::vector<double> passes;
  for (int pass = 0; pass < 3; ++pass) {
    const std::int64_t start = now_ns();
    for (std::uint64_t i = 0; i < calls; ++i)
      sink += try_kernel(backend, ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY).raw;
    passes.push_back(static_cast<double>(now_ns() - start) / static_cast<double>(calls));
  }
  if (sink == 0) throw_error("try_kernel on the loaded shared module returned 0");
  return median(passes);
}

struct LaunchCost {
  double kiln_us = 0;
  double raw_us = 0;
};

/// Host µs per enqueue of the shared kernel at M=1, K=128 (one CTA), through kiln and raw, in
/// alternating chunks; the stream is drained between chunks so the queue never fills and blocks.
LaunchCost launch_cost(const BenchPlan& plan, GpuSession& gpu) {
  const std::uint32_t m = 1, k = ops::FP8_QUANT_GROUP;
  test::DeviceBuffer x(gpu.context(), 2 * k), q(gpu.context(), k), s(gpu.context(), 4);
  gpu.fill_bf16(x.get(), k, 3);
  const ShapeBuffers::Slot slot{x.get(), q.get(), static_cast<float*>(s.get())};
  const KernelHandle handle = gpu.quant().shared();
  const CUfunction raw = gpu.function(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY);
  const auto grid = ops::fp8_quant_grid(false, m, k);

  const auto kiln_launch = [&] { launch_quant(gpu, handle, false, m, k, slot, gpu.stream()); };
  const auto raw_launch = [&] {
    const void* px = slot.x;
    void* pq = slot.q;
    float* ps = slot.scales;
    std::uint32_t k_arg = k;
    void* args[] = {&px, &pq, &ps, &k_arg};
    gpu.launch_raw(raw, Dim3{grid[0], grid[1], grid[2]}, Dim3{ops::FP8_QUANT_GROUP, 1, 1}, args);
  };
  const auto chunk_us = [&](const auto& launch) {
    gpu.synchronize();
    const std::int64_t start = now_ns();
    for (int i = 0; i < plan.launch_chunk; ++i) launch();
    const double us = static_cast<double>(now_ns() - start) / 1e3 / plan.launch_chunk;
    gpu.synchronize();
    return us;
  };
  chunk_us(kiln_launch);
  chunk_us(raw_launch);
  std::vector<double> kiln_chunks, raw_chunks;
  for (int c = 0; c < plan.launch_chunks; ++c) {
    kiln_chunks.push_back(chunk_us(kiln_launch));
    raw_chunks.push_back(chunk_us(raw_launch));
  }
  return {median(kiln_chunks), median(raw_chunks)};
}

}  // namespace

void run_launch(const BenchPlan& plan, GpuSession& gpu, Report& report) {
  const double hit_ns = memory_hit_ns(gpu, plan.memory_hit_calls);
  const LaunchCost cost = launch_cost(plan, gpu);
  const double overhead_us = cost.kiln_us - cost.raw_us;

  Table table;
  table.id = "launch";
  table.title =
      "in-process: memory-hit try_kernel, and host time per launch through kiln vs raw cuLaunchKernel "
      "(shared kernel, M=1 K=128, primary context current on the thread)";
  table.columns = {"measurement", "value", "unit"};
  table.add({"try_kernel, module in memory (" + std::to_string(plan.memory_hit_calls) + " calls)", fixed(hit_ns, 1),
             "ns/call"},
            {{"name", "memory_hit_ns"}, {"value", hit_ns}, {"calls", plan.memory_hit_calls}});
  table.add({"CudaBackend::launch", fixed(cost.kiln_us, 3), "us/launch"},
            {{"name", "kiln_launch_us"}, {"value", cost.kiln_us}});
  table.add({"raw cuLaunchKernel, same binary", fixed(cost.raw_us, 3), "us/launch"},
            {{"name", "raw_launch_us"}, {"value", cost.raw_us}});
  table.add({"kiln over raw", fixed(overhead_us, 3), "us/launch"},
            {{"name", "launch_overhead_us"}, {"value", overhead_us}});
  table.notes.push_back(std::to_string(plan.launch_chunks) + " alternating chunks of " +
                        std::to_string(plan.launch_chunk) + " launches per path, median of the chunks");
  report.add(std::move(table));

  report.add_target({"memory hit (try_kernel on a loaded module)",
                     fixed(hit_ns, 1) + " ns",
                     "<= 100 ns",
                     hit_ns <= 100,
                     {{"ns", hit_ns}}});
  report.add_target({"kiln launch overhead over raw cuLaunchKernel",
                     fixed(overhead_us, 3) + " us (" + fixed(cost.kiln_us, 3) + " vs " + fixed(cost.raw_us, 3) + ")",
                     "<= 0.5 us",
                     overhead_us <= 0.5,
                     {{"kiln_us", cost.kiln_us}, {"raw_us", cost.raw_us}}});
}

}  // namespace kiln::bench

// CPU-only microbenchmarks: how long a pick costs, and what NVRTC costs per module, first in the
// process, one after the other, and two modules at once.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "jit/compiler.hpp"
#include "jit/registry.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::bench {

namespace {

constexpr std::uint32_t H200_SMS = 132;

/// ns per pick_with over varied (m, k), the result folded into a sink the compiler must keep.
double pick_with_ns(std::uint64_t calls) {
  // Why placeholder handles: pick_with is pure; 1 and 2 stand for "loaded" as in `kiln pick`.
  const ops::Fp8ActQuant quant(KernelHandle{1}, KernelHandle{2}, H200_SMS);
  std::vector<std::uint32_t> ms, ks;
  std::uint32_t state = 0x9E3779B9u;
  for (int i = 0; i < 1024; ++i) {
    state = state * 1664525u + 1013904223u;
    ms.push_back(1 + (state >> 8) % 40000);
    ks.push_back(128 * (1 + (state >> 20) % 160));
  }
  std::vector<double> passes;
  std::uint64_t sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const std::int64_t start = now_ns();
    for (std::uint64_t i = 0; i < calls; ++i) {
      const auto chosen = quant.pick_with(true, ms[i & 1023], ks[i & 1023], H200_SMS);
      sink += chosen.grid[0] ^ chosen.grid[1] ^ static_cast<std::uint32_t>(chosen.twin);
    }
    passes.push_back(static_cast<double>(now_ns() - start) / static_cast<double>(calls));
  }
  volatile std::uint64_t keep = sink;
  static_cast<void>(keep);
  return median(passes);
}

const KernelSource& embedded(std::string_view module) {
  const KernelSource* source = find_module(module);
  if (source == nullptr) throw_error("the embedded registry lacks module '" + std::string(module) + "'");
  return *source;
}

double compile_ms(const KernelSource& source, const Target& target, const std::vector<std::string>& options) {
  const std::int64_t start = now_ns();
  compile_module(source, target, options);
  return ms_between(start, now_ns());
}

struct CompileTimes {
  double first_ms = 0;   ///< the process's first compile (NVRTC's own start-up included)
  double shared_ms = 0;  ///< later compiles, one module at a time: median
  double twin_ms = 0;
  double parallel_ms = 0;  ///< both modules at once on two threads, wall time: median
};

double parallel_ms(const KernelSource& a, const KernelSource& b, const Target& target,
                   const std::vector<std::string>& options) {
  const std::int64_t start = now_ns();
  std::exception_ptr failure;
  std::thread other([&] {
    try {
      compile_module(b, target, options);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  compile_module(a, target, options);
  other.join();
  if (failure) std::rethrow_exception(failure);
  return ms_between(start, now_ns());
}

CompileTimes compile_times(int reps) {
  const Target target = parse_target("sm_90a");
  const auto options = compile_options(target, false);
  const KernelSource& shared = embedded(ops::FP8_QUANT_MODULE);
  const KernelSource& twin = embedded(ops::FP8_QUANT_HOPPER_MODULE);
  CompileTimes times;
  times.first_ms = compile_ms(shared, target, options);
  std::vector<double> shared_ms, twin_ms, both_ms;
  for (int rep = 0; rep < reps; ++rep) {
    shared_ms.push_back(compile_ms(shared, target, options));
    twin_ms.push_back(compile_ms(twin, target, options));
    both_ms.push_back(parallel_ms(shared, twin, target, options));
  }
  times.shared_ms = median(shared_ms);
  times.twin_ms = median(twin_ms);
  times.parallel_ms = median(both_ms);
  return times;
}

}  // namespace

void run_host(const BenchPlan& plan, Report& report) {
  Table table;
  table.id = "host";
  table.title = "host (CPU only): pick_with and NVRTC compile of the quantizer modules for sm_90a";
  table.columns = {"measurement", "value", "unit"};

  const double pick_ns = pick_with_ns(plan.pick_calls);
  table.add({"pick_with (varied m, k; median of 3 passes of " + std::to_string(plan.pick_calls) + ")",
             fixed(pick_ns, 2), "ns/call"},
            {{"name", "pick_with_ns"}, {"value", pick_ns}, {"calls", plan.pick_calls}});

  const CompileTimes compile = compile_times(plan.compile_reps);
  const unsigned cpus = std::thread::hardware_concurrency();
  const double longest = std::max(compile.shared_ms, compile.twin_ms);
  table.add({"NVRTC first compile in this process (shared module)", fixed(compile.first_ms, 1), "ms"},
            {{"name", "nvrtc_first_compile_ms"}, {"value", compile.first_ms}});
  table.add(
      {"NVRTC compile, shared module (" + std::string(ops::FP8_QUANT_MODULE) + ")", fixed(compile.shared_ms, 1), "ms"},
      {{"name", "nvrtc_compile_shared_ms"}, {"value", compile.shared_ms}});
  table.add({"NVRTC compile, twin module (" + std::string(ops::FP8_QUANT_HOPPER_MODULE) + ")",
             fixed(compile.twin_ms, 1), "ms"},
            {{"name", "nvrtc_compile_twin_ms"}, {"value", compile.twin_ms}});
  table.add({"both modules at once on 2 threads (wall; median of " + std::to_string(plan.compile_reps) + ")",
             fixed(compile.parallel_ms, 1), "ms"},
            {{"name", "nvrtc_parallel_wall_ms"}, {"value", compile.parallel_ms}, {"cpus", cpus}});
  report.add(std::move(table));

  report.add_target({"pick_with", fixed(pick_ns, 2) + " ns", "<= 10 ns", pick_ns <= 10, {{"ns", pick_ns}}});
  report.add_target({"cold compile (NVRTC) per module, for reference",
                     fixed(compile.shared_ms, 1) + " / " + fixed(compile.twin_ms, 1) + " ms (shared / twin); first " +
                         fixed(compile.first_ms, 1) + " ms",
                     "-",
                     std::nullopt,
                     {{"shared_ms", compile.shared_ms}, {"twin_ms", compile.twin_ms}, {"first_ms", compile.first_ms}}});
  TargetRow parallel{
      "cold compile of independent modules runs in parallel",
      fixed(compile.parallel_ms, 1) + " ms for both vs " + fixed(longest, 1) + " ms for the longer alone",
      "<= 1.2x the longer",
      compile.parallel_ms <= 1.2 * longest,
      {{"parallel_ms", compile.parallel_ms}, {"longest_ms", longest}, {"cpus", cpus}}};
  if (cpus < 2) {
    parallel.measured += " (1 CPU: nothing can overlap)";
    parallel.met.reset();
  }
  report.add_target(std::move(parallel));
}

}  // namespace kiln::bench

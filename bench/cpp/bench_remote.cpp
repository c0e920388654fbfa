// The fleet cache (KILN_REMOTE_CACHE, issue 18's benchmark): a node with an empty disk and a warm
// Redis gets each module through the real provider (disk miss, remote hit, verify, write to disk),
// against compiling it. Runs where a Redis is configured: bench/device_remote_cache.sh and
// bench/remote_cache.py start one and set the variable; without it the part says so and skips.
#include <chrono>
#include <vector>

#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "bench_temp.hpp"
#include "cache/disk/disk_cache.hpp"
#include "runtime/module_provider.hpp"
#include "runtime/prefetch.hpp"
#include "cache/remote/remote_cache.hpp"
#include "jit/compiler.hpp"
#include "jit/target_select.hpp"
#include "runtime/cuda_backend.hpp"
#include "kiln/error.hpp"

namespace kiln::bench {

namespace {

constexpr double TARGET_MS = 5.0;

ModuleProvider node(const std::string& dir, const Compiler& compiler) {
  DiskCacheConfig config;
  config.dir = dir;
  return make_module_provider(std::make_shared<DiskCache>(config), compiler, {}, process_remote_cache());
}

}  // namespace

void run_remote(const BenchPlan& plan, Report& report) {
  const auto remote = process_remote_cache();
  if (!remote->enabled()) {
    report.skip("remote", "KILN_REMOTE_CACHE is not set (bench/remote_cache.py and bench/device_remote_cache.sh "
                          "start a Redis and set it)");
    return;
  }
  const Target target = auto_target();
  const Compiler compiler(false);
  const TempDir temp("remote");
  const auto modules = carried_modules(target);
  // One node fills Redis (compiling, or finding what an earlier run published).
  const ModuleProvider filler = node(temp.subdir("filler"), compiler);
  for (const KernelSource* source : modules) filler.provide(*source, target);

  Table table;
  table.id = "remote";
  table.title = "remote: a node with an empty disk and a warm Redis, per module (" + target.name() + ", median of " +
                std::to_string(plan.remote_nodes) + " fresh nodes), against compiling it";
  table.columns = {"module", "bytes", "empty disk, warm Redis ms", "compile ms"};
  double worst = 0;
  for (const KernelSource* source : modules) {
    std::vector<double> ms;
    std::size_t bytes = 0;
    for (int i = 0; i < plan.remote_nodes; ++i) {
      const auto before = remote->counters();
      const ModuleProvider fresh = node(temp.subdir("node" + std::to_string(i) + "-" + source->module), compiler);
      const auto start = std::chrono::steady_clock::now();
      const ProvidedModule got = fresh.provide(*source, target);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (remote->counters().remote_hits != before.remote_hits + 1)
        throw_error("bench: " + source->module + " did not come from Redis (is it reachable? see the warnings)");
      bytes = got.module.cubin.size() + got.module.ptx.size();
    }
    const double compile_ms = compiler.compile(*source, target).compile_ms;
    const double median_ms = median(ms);
    worst = std::max(worst, median_ms);
    table.add({source->module, std::to_string(bytes), fixed(median_ms, 2), fixed(compile_ms, 1)},
              {{"module", source->module}, {"target", target.name()}, {"bytes", bytes}, {"remote_ms", median_ms},
               {"compile_ms", compile_ms}});
  }
  report.add(std::move(table));
  report.add_target({"empty disk, warm Redis: worst module (the driver's start-up aside)", fixed(worst, 2) + " ms",
                     "<= 5 ms", worst <= TARGET_MS, {{"ms", worst}}});
}

}  // namespace kiln::bench

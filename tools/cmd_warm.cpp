// kiln warm: fill the disk cache ahead of time (container images, fleets), compiling in parallel.
// Needs no GPU: it compiles and caches; the driver loads the binaries later.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/log.hpp"
#include "cache/disk/disk_cache.hpp"
#include "cache/module_provider.hpp"
#include "cache/prefetch.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "jit/compiler.hpp"
#include "kiln/service.hpp"

namespace kiln::cli {

namespace {

struct WarmArgs {
  std::string arch = "auto";
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  bool json = false;
};

struct WarmJob {
  const KernelSource* source;
  Target target;
  bool from_disk = false;
  std::string error;
};

void run(const WarmArgs& args) {
  const auto disk = process_disk_cache();
  if (disk->status().mode != DiskCacheMode::read_write)
    logger().warn("kiln warm: the disk cache is {} ({}): compiling, but nothing will be kept",
                  to_string(disk->status().mode), disk->status().reason);
  std::vector<WarmJob> jobs;
  for (const auto& target : requested_targets(args.arch))
    for (const KernelSource* source : carried_modules(target)) jobs.push_back(WarmJob{source, target, false, {}});

  const ModuleProvider provider = make_module_provider(disk, Compiler());
  const bool progress = !args.json && ::isatty(STDERR_FILENO);
  std::atomic<std::size_t> done{0};
  std::mutex print;
  const auto start = std::chrono::steady_clock::now();
  parallel_for(jobs.size(), args.jobs, [&](std::size_t i) {
    auto& job = jobs[i];
    try {
      job.from_disk = provider.provide(*job.source, job.target).from_disk;
    } catch (const std::exception& e) {
      job.error = e.what();
    }
    const std::size_t finished = ++done;
    if (progress) {
      const std::lock_guard<std::mutex> lock(print);
      std::fprintf(stderr, "\r[%zu/%zu] %s %s%s\033[K", finished, jobs.size(), job.source->module.c_str(),
                   job.target.name().c_str(), job.error.empty() ? (job.from_disk ? " (cached)" : "") : " FAILED");
    }
  });
  if (progress) std::fprintf(stderr, "\n");
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::size_t failed = 0;
  for (const auto& job : jobs)
    if (!job.error.empty()) {
      ++failed;
      std::fprintf(stderr, "kiln: %s %s: %s\n", job.source->module.c_str(), job.target.name().c_str(), job.error.c_str());
    }
  const auto counters = disk->counters();
  if (args.json) {
    // Why no memory counters: warm compiles and caches only, it loads nothing.
    nlohmann::json out = counters_json(ServiceCounters{ModuleCacheCounters{}, counters});
    out["modules"] = jobs.size();
    out["failed"] = failed;
    out["wall_ms"] = wall_ms;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%zu modules: %llu compiled, %llu already cached, %zu failed; %.1f ms; cache %s\n", jobs.size(),
                static_cast<unsigned long long>(counters.compiles), static_cast<unsigned long long>(counters.disk_hits),
                failed, wall_ms, disk->status().dir.c_str());
  }
  if (failed != 0) set_exit_code(1);
}

}  // namespace

void add_warm_command(CLI::App& app) {
  auto args = std::make_shared<WarmArgs>();
  auto* cmd = app.add_subcommand("warm", "Fill the disk cache ahead of time (no GPU needed), compiling in parallel");
  cmd->add_option("--arch", args->arch, "Target: sm_90a, ...; auto (KILN_ARCH, else this GPU, else sm_90a); all");
  cmd->add_option("--jobs", args->jobs, "Compiles in parallel (default: the CPU count)")->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "End with this process's counters as one JSON object");
  cmd->callback([args] { run(*args); });
}

}  // namespace kiln::cli

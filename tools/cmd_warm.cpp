// kiln warm: fill the disk cache ahead of time (container images, fleets), compiling in parallel.
// Needs no GPU: it compiles and caches; the driver loads the binaries later. Exits 1 unless every
// module ends up in the cache folder, so an image build cannot ship a cold cache unnoticed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/disk/disk_cache.hpp"
#include "cache/module_provider.hpp"
#include "cache/prefetch.hpp"
#include "cache/remote/remote_cache.hpp"
#include "cli_common.hpp"
#include "cli_progress.hpp"
#include "cli_workers.hpp"
#include "commands.hpp"
#include "jit/compiler.hpp"
#include "kiln/service.hpp"

namespace kiln::cli {

namespace {

struct WarmArgs {
  std::string arch = "auto";
  std::string variants;  ///< a variant manifest (jit/variants.hpp); empty: the embedded modules only
  unsigned jobs = default_jobs();
  bool json = false;
};

struct WarmJob {
  const KernelSource* source;
  Target target;
  bool from_disk = false;
  double compile_ms = 0;  ///< this process's compile, when not from disk
  std::string error;
};

/// The summary a container build reads: one JSON object (`--json`) or one line, and why nothing
/// or not everything was kept, on stderr.
struct WarmReport {
  std::size_t modules = 0;
  std::size_t failed = 0;
  std::size_t kept = 0;
  double wall_ms = 0;
  std::string problem;  ///< empty when every module that compiled is in the cache folder
};

void print_report(const WarmArgs& args, const WarmReport& report, const DiskCache& disk,
                  const ModuleCacheCounters& memory, const DiskCacheCounters& counters) {
  const auto status = disk.status();
  if (args.json) {
    nlohmann::json out = counters_json(ServiceCounters{memory, counters, process_remote_cache()->counters()});
    out["modules"] = report.modules;
    out["failed"] = report.failed;
    out["kept"] = report.kept;
    out["wall_ms"] = report.wall_ms;
    out["cache"] = {{"mode", std::string(to_string(status.mode))}, {"dir", status.dir}, {"reason", status.reason}};
    if (!report.problem.empty()) out["error"] = report.problem;
    std::printf("%s\n", out.dump().c_str());
  } else {
    // Why the memory counters' compiles: the disk's count includes modules fetched from Redis.
    const auto remote = process_remote_cache()->counters();
    std::printf("%zu modules: %llu compiled, %llu already cached, %llu from the remote cache, %zu failed, %zu kept; "
                "%.1f ms; cache %s\n",
                report.modules, static_cast<unsigned long long>(memory.compiles),
                static_cast<unsigned long long>(counters.disk_hits),
                static_cast<unsigned long long>(remote.remote_hits), report.failed, report.kept, report.wall_ms,
                status.dir.empty() ? "(no folder)" : status.dir.c_str());
  }
  if (!report.problem.empty()) std::fprintf(stderr, "kiln warm: %s\n", report.problem.c_str());
}

void run(const WarmArgs& args) {
  const std::vector<const KernelSource*> variants =
      args.variants.empty() ? std::vector<const KernelSource*>{} : variant_manifest_sources(args.variants);
  std::vector<WarmJob> jobs;
  for (const auto& target : requested_targets(args.arch)) {
    for (const KernelSource* source : carried_modules(target)) jobs.push_back(WarmJob{source, target, false, 0, {}});
    for (const KernelSource* source : variants)
      if (target.carries(source->family)) jobs.push_back(WarmJob{source, target, false, 0, {}});
  }

  const auto disk = process_disk_cache();
  const auto status = disk->status();
  WarmReport report;
  report.modules = jobs.size();
  if (status.mode != DiskCacheMode::read_write) {
    // Why nothing is compiled: warm exists to fill the folder, and a container build that goes on
    // with an empty cache must stop here, told why and which folder.
    report.problem = "nothing can be kept: the disk cache is " + std::string(to_string(status.mode)) +
                     (status.dir.empty() ? "" : " at '" + status.dir + "'") + " (" + status.reason +
                     "); no module compiled";
    print_report(args, report, *disk, ModuleCacheCounters{}, disk->counters());
    set_exit_code(EXIT_FAILED);
    return;
  }

  const Compiler compiler;
  const ModuleProvider provider = make_module_provider(disk, compiler);
  const auto start = std::chrono::steady_clock::now();
  Progress progress("kiln warm", jobs.size(), !args.json);
  std::vector<WorkItem> work;
  for (const auto& job : jobs) work.emplace_back(job.source, job.target);
  // Why a silent second pass after the workers: the parent then only reads what they published.
  WorkerTotals totals;
  const bool workers = compile_in_processes(work, args.jobs, progress, totals);
  Progress collecting("kiln warm", jobs.size(), !args.json && !workers);
  parallel_for(jobs.size(), args.jobs, [&](std::size_t i) {
    auto& job = jobs[i];
    collecting.start(job.source->module, job.target.name());
    try {
      const ProvidedModule provided = provider.provide(*job.source, job.target);
      job.from_disk = provided.from_disk;
      if (!job.from_disk) job.compile_ms = provided.module.compile_ms;
    } catch (const std::exception& e) {
      job.error = e.what();
    }
    collecting.finish(job.from_disk, !job.error.empty());
  });
  progress.end();
  collecting.end();
  report.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  // Why the memory counters are gathered here: warm loads nothing, so no ModuleCache counts its
  // compiles; without this, `compile_ms` read 0 after any number of compiles.
  ModuleCacheCounters memory;
  DiskCacheCounters counters = disk->counters();
  if (workers) {
    // Why: the workers compiled and healed; this process only read back what they published,
    // which is bookkeeping, not a hit to report.
    std::uint64_t read_back = 0;
    for (const auto& job : jobs) read_back += job.from_disk ? 1 : 0;
    counters.disk_hits -= std::min(counters.disk_hits, read_back);
#define KILN_ADD(name) counters.name += totals.disk.name;
    KILN_ADD(disk_hits) KILN_ADD(disk_misses) KILN_ADD(compiles) KILN_ADD(corrupt_healed) KILN_ADD(rejected)
    KILN_ADD(lock_waits) KILN_ADD(lock_timeouts) KILN_ADD(lock_failures) KILN_ADD(evictions) KILN_ADD(store_failures)
#undef KILN_ADD
    memory.compiles += totals.disk.compiles;
    memory.compile_ms += totals.compile_ms;
  }
  std::vector<std::string> missing;
  for (const auto& job : jobs) {
    if (!job.error.empty()) {
      ++report.failed;
      std::fprintf(stderr, "kiln: %s %s: %s\n", job.source->module.c_str(), job.target.name().c_str(),
                   job.error.c_str());
      continue;
    }
    if (!job.from_disk) {
      ++memory.compiles;
      memory.compile_ms += job.compile_ms;
    }
    // Why look in the folder rather than trust the store: a store can fail (full disk, an entry
    // above KILN_CACHE_MAX_BYTES) or a later store can evict it, and each costs only a warning.
    const CacheKey key = module_cache_key(*job.source, job.target, compiler.options(job.target));
    const std::string path = status.dir + "/" + DiskCache::entry_name(key, job.source->module, job.target);
    if (::access(path.c_str(), F_OK) == 0)
      ++report.kept;
    else
      missing.push_back(job.source->module + " " + job.target.name());
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& name : missing) names += (names.empty() ? "" : ", ") + name;
    report.problem = std::to_string(missing.size()) + " of " + std::to_string(jobs.size()) +
                     " modules are not in the cache at '" + status.dir + "' (" +
                     std::to_string(counters.store_failures) + " stores failed, " +
                     std::to_string(counters.evictions) + " evicted): " + names;
  }
  print_report(args, report, *disk, memory, counters);
  if (report.failed != 0 || !missing.empty()) set_exit_code(EXIT_FAILED);
}

}  // namespace

void add_warm_command(CLI::App& app) {
  auto args = std::make_shared<WarmArgs>();
  auto* cmd = app.add_subcommand("warm", "Fill the disk cache ahead of time (no GPU needed), compiling in parallel");
  cmd->add_option("--arch", args->arch, "Target: sm_90a, ...; auto (KILN_ARCH, else this GPU, else sm_90a); all");
  cmd->add_option("--variants", args->variants,
                  "Also compile the variants this manifest lists (one per line: a name from `kiln list --variants`, "
                  "or 'family name=value ...')")
      ->check(CLI::ExistingFile);
  cmd->add_option("--jobs", args->jobs, "Compiles at once, in separate processes (default: the CPU count)")->transform(integer_in(1, 256));
  cmd->add_flag("--json", args->json, "End with this process's counters as one JSON object");
  cmd->callback([args] { run(*args); });
}

}  // namespace kiln::cli

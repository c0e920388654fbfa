// kiln warm: fill the disk cache ahead of time (container images, fleets), compiling in parallel.
// Needs no GPU: it compiles and caches; the driver loads the binaries later. Exits 1 unless every
// module ends up in the cache folder or is held by a read-only layer of KILN_CACHE_PATH (a bundle
// or a folder, searched first and never compiled over), so an image build cannot ship a cold
// cache unnoticed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache_path.hpp"
#include "cache/disk/disk_cache.hpp"
#include "runtime/module_provider.hpp"
#include "runtime/prefetch.hpp"
#include "cache/remote/remote_cache.hpp"
#include "cli_common.hpp"
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

/// The summary a container build reads: one JSON object (`--json`) or one line, and why nothing
/// or not everything was kept, on stderr.
struct WarmReport {
  std::size_t modules = 0;
  std::size_t failed = 0;
  std::size_t kept = 0;        ///< in the writable cache folder at the end
  std::size_t layer_hits = 0;  ///< served by a read-only layer of KILN_CACHE_PATH (never compiled, not copied)
  double wall_ms = 0;
  std::string problem;  ///< empty when every module is in the cache folder or a read-only layer
};

nlohmann::json layers_json() {
  auto out = nlohmann::json::array();
  for (const auto& layer : process_cache_path().layers) {
    const LayerReport report = layer->report();
    out.push_back({{"path", report.path}, {"kind", report.kind}, {"usable", report.usable}, {"state", report.state},
                   {"hits", report.hits}, {"bad_entries", report.bad_entries}});
  }
  return out;
}

void print_report(const WarmArgs& args, const WarmReport& report, const DiskCache& disk,
                  const ModuleCacheCounters& memory, const DiskCacheCounters& counters) {
  const auto status = disk.status();
  if (args.json) {
    nlohmann::json out = counters_json(ServiceCounters{memory, counters, process_remote_cache()->counters()});
    out["modules"] = report.modules;
    out["failed"] = report.failed;
    out["kept"] = report.kept;
    out["layer_hits"] = report.layer_hits;
    out["layers"] = layers_json();
    out["wall_ms"] = report.wall_ms;
    out["cache"] = {{"mode", std::string(to_string(status.mode))}, {"dir", status.dir}, {"reason", status.reason}};
    if (!report.problem.empty()) out["error"] = report.problem;
    std::printf("%s\n", out.dump().c_str());
  } else {
    // Why the memory counters' compiles: they count NVRTC compiles only (a Redis fetch is a remote hit).
    const auto remote = process_remote_cache()->counters();
    std::printf("%zu modules: %llu compiled, %llu already cached, %zu from read-only layers, %llu from the remote "
                "cache, %zu failed, %zu kept; %.1f ms; cache %s\n",
                report.modules, static_cast<unsigned long long>(memory.compiles),
                static_cast<unsigned long long>(counters.disk_hits), report.layer_hits,
                static_cast<unsigned long long>(remote.remote_hits), report.failed, report.kept, report.wall_ms,
                status.dir.empty() ? "(no folder)" : status.dir.c_str());
  }
  if (!report.problem.empty()) std::fprintf(stderr, "kiln warm: %s\n", report.problem.c_str());
}

void run(const WarmArgs& args) {
  const std::vector<const KernelSource*> variants =
      args.variants.empty() ? std::vector<const KernelSource*>{} : variant_manifest_sources(args.variants);
  const std::vector<WorkItem> work = modules_for(requested_targets(args.arch), variants);

  const auto disk = process_disk_cache();
  const auto status = disk->status();
  const auto& layers = process_cache_path().layers;
  const Compiler compiler;
  WarmReport report;
  report.modules = work.size();
  if (status.mode != DiskCacheMode::read_write) {
    // Why the layers are still asked: what they hold needs no folder; only the rest must be kept.
    std::size_t in_layers = 0;
    for (const auto& [source, target] : work)
      in_layers += find_in_layers(layers, *source, target, compiler.options(target)) ? 1 : 0;
    report.layer_hits = in_layers;
    if (in_layers == work.size()) {
      print_report(args, report, *disk, ModuleCacheCounters{}, disk->counters());
      return;
    }
    // Why nothing is compiled: warm exists to fill the folder, and a container build that goes on
    // with an empty cache must stop here, told why and which folder.
    report.problem = "nothing can be kept: the disk cache is " + std::string(to_string(status.mode)) +
                     (status.dir.empty() ? "" : " at '" + status.dir + "'") + " (" + status.reason +
                     "); no module compiled" +
                     (layers.empty() ? "" : " (" + std::to_string(work.size() - in_layers) + " of " +
                                                std::to_string(work.size()) + " modules are in no read-only layer)");
    print_report(args, report, *disk, ModuleCacheCounters{}, disk->counters());
    set_exit_code(EXIT_FAILED);
    return;
  }

  // Why the layers in the provider too: with KILN_JIT=off its error names every layer searched.
  const ModuleProvider provider = make_module_provider(disk, compiler, layers);
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> compile_ms(work.size(), 0.0);  // this process's compiles
  const ProvidedWork done = provide_all(work, provider, compiler, layers, args.jobs, "kiln warm", !args.json,
                                        [&](std::size_t i, const ProvidedModule& provided) {
                                          if (!provided.from_disk) compile_ms[i] = provided.module.compile_ms;
                                        });
  report.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  // Why the memory counters are gathered here: warm loads nothing, so no ModuleCache counts its
  // compiles; without this, `compile_ms` read 0 after any number of compiles. They count NVRTC
  // compiles in this process tree only: a module from a layer, the disk or Redis is not one.
  ModuleCacheCounters memory;
  DiskCacheCounters counters = disk->counters();
  if (done.workers) {
    // Why: the workers compiled and healed; this process only read back what they published,
    // which is bookkeeping, not a hit to report.
    std::uint64_t read_back = 0;
    for (const auto& item : done.items) read_back += item.from_disk && !item.from_layer ? 1 : 0;
    counters.disk_hits -= std::min(counters.disk_hits, read_back);
    add_disk_counters(counters, done.totals.disk);
    // Why the disk's compiles: workers run without the remote tier, so each is an NVRTC compile.
    memory.compiles += done.totals.disk.compiles;
    memory.compile_ms += done.totals.compile_ms;
  }
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < work.size(); ++i) {
    const auto& [source, target] = work[i];
    if (const std::string& error = done.items[i].error; !error.empty()) {
      ++report.failed;
      std::fprintf(stderr, "kiln: %s %s: %s\n", source->module.c_str(), target.name().c_str(), error.c_str());
      continue;
    }
    if (done.items[i].from_layer) {
      ++report.layer_hits;
      continue;
    }
    if (!done.items[i].from_disk) {
      ++memory.compiles;
      memory.compile_ms += compile_ms[i];
    }
    // Why look in the folder rather than trust the store: a store can fail (full disk, an entry
    // above KILN_CACHE_MAX_BYTES) or a later store can evict it, and each costs only a warning.
    const CacheKey key = module_cache_key(*source, target, compiler.options(target));
    const std::string path = status.dir + "/" + DiskCache::entry_name(key, source->module, target);
    if (::access(path.c_str(), F_OK) == 0)
      ++report.kept;
    else
      missing.push_back(source->module + " " + target.name());
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& name : missing) names += (names.empty() ? "" : ", ") + name;
    report.problem = std::to_string(missing.size()) + " of " + std::to_string(work.size()) +
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
      ->check(existing_file("a variant manifest file"));
  cmd->add_option("--jobs", args->jobs, "Compiles at once, in separate processes (default: the CPU count)")->transform(integer_in(1, 256));
  cmd->add_flag("--json", args->json, "End with this process's counters as one JSON object");
  cmd->callback([args] {
    run(*args);
    // Why exit 1: KILN_REMOTE_CACHE asked for the fleet tier and a bad setting turned it off (the
    // warning names it); an image build must not pass without the tier it configured.
    if (const auto remote = process_remote_cache(); remote->requested_but_off()) {
      std::fprintf(stderr, "kiln warm: the remote cache was requested (KILN_REMOTE_CACHE) but is off: %s\n",
                   remote->status().reason.c_str());
      set_exit_code(EXIT_FAILED);
    }
  });
}

}  // namespace kiln::cli

#pragma once
// Compiles in several processes at once: NVRTC 13.0 serialises compiles inside one process (README
// "Benchmark": two threads take as long as one after the other), so `kiln pack` and `kiln warm`
// hand shares of their work to child processes (`kiln worker`, hidden), which compile and publish
// to the shared disk cache (safe for many processes: atomic publish, one compile per key). The
// parent then reads every result from the disk cache as usual, so a child that fails costs only
// time: the parent compiles what is missing itself.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "cache/cache_layer.hpp"
#include "runtime/module_provider.hpp"
#include "cli_progress.hpp"
#include "jit/compiler.hpp"
#include "jit/registry.hpp"
#include "kiln/counters.hpp"
#include "kiln/target.hpp"

namespace kiln::cli {

/// The CPU count (at least 1): the default of --jobs.
unsigned default_jobs();

using WorkItem = std::pair<const KernelSource*, Target>;

/// What the workers did, summed: their disk caches' counters and their compile time.
struct WorkerTotals {
  DiskCacheCounters disk;
  double compile_ms = 0;
};

/// Runs `work` in up to `jobs` child processes and waits for them, reporting each finished item
/// to `progress` and summing their counters into `totals`. Returns false, doing nothing, when
/// processes cannot help: `jobs` < 2, fewer than two items, KILN_JIT=off, no NVRTC, or no writable
/// disk cache to hand results back through.
bool compile_in_processes(const std::vector<WorkItem>& work, unsigned jobs, Progress& progress, WorkerTotals& totals);

/// Adds every counter of `from` to `into`.
void add_disk_counters(DiskCacheCounters& into, const DiskCacheCounters& from);

/// One item as this process got it, after any workers.
struct ProvidedItem {
  bool from_disk = false;   ///< from a cache rather than compiled here (a read-only layer, the disk, Redis)
  bool from_layer = false;  ///< from a read-only layer of KILN_CACHE_PATH (a bundle or a folder)
  std::string error;        ///< why not provided; empty when it was
};

/// The module of `source` for `target` from the first of `layers` that holds it, looked up as the
/// module provider does (by this process's NVRTC build; without an NVRTC, by the build the layer
/// records), dumped when KILN_DUMP_DIR is set; nothing when no layer has it.
std::optional<CompiledModule> find_in_layers(const std::vector<std::shared_ptr<CacheLayer>>& layers,
                                             const KernelSource& source, const Target& target,
                                             const std::vector<std::string>& options);

/// What provide_all did.
struct ProvidedWork {
  std::vector<ProvidedItem> items;  ///< in the order of the work
  bool workers = false;             ///< child processes compiled; `items` then reads their results back
  WorkerTotals totals;              ///< the workers' counters, when `workers`
  std::size_t worker_cached = 0;    ///< items the workers found in the disk cache, when `workers`
};

/// The common step of `kiln pack` and `kiln warm`: takes what the read-only `layers` hold from
/// them (never compiled, never handed to a worker), compiles the rest in child processes where they
/// help, then provides every remaining item in this process on up to `jobs` threads, handing item
/// i's module to `use(i, module)` (which may throw: the item's error). One progress line labelled
/// `label` when `show`; after workers, the parent's read-back is not shown (it only reads what they
/// published).
ProvidedWork provide_all(const std::vector<WorkItem>& work, const ModuleProvider& provider, const Compiler& compiler,
                         const std::vector<std::shared_ptr<CacheLayer>>& layers, unsigned jobs,
                         const std::string& label, bool show,
                         const std::function<void(std::size_t, ProvidedModule&)>& use);

/// `kiln worker MODULE@TARGET...` (hidden): the child's side.
void add_worker_command(CLI::App& app);

}  // namespace kiln::cli

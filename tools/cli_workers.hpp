#pragma once
// Compiles in several processes at once: NVRTC 13.0 serialises compiles inside one process (README
// "Benchmark": two threads take as long as one after the other), so `kiln pack` and `kiln warm`
// hand shares of their work to child processes (`kiln worker`, hidden), which compile and publish
// to the shared disk cache (safe for many processes: atomic publish, one compile per key). The
// parent then reads every result from the disk cache as usual, so a child that fails costs only
// time: the parent compiles what is missing itself.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_progress.hpp"
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

/// `kiln worker MODULE@TARGET...` (hidden): the child's side.
void add_worker_command(CLI::App& app);

}  // namespace kiln::cli

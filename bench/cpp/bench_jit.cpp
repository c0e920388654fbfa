// The JIT path from a user's point of view: fresh processes, each timed from the parent's spawn.
//   driver:            cuInit and the primary context only, the reference for the cold target;
//   cold:              an empty cache folder, Service(0) then the default variant's kernels
//                      (group_quant), whatever the library overlaps;
//   cold, driver first: the same after the driver is up, which splits compile from driver time;
//   warm:              the cold run's folder again (disk hits), after the driver is up.
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "bench_spawn.hpp"
#include "bench_stats.hpp"
#include "bench_temp.hpp"
#include "kiln/error.hpp"

namespace kiln::bench {

namespace {

struct Variant {
  std::string id;
  std::string label;
  std::vector<std::string> args;
  std::map<std::string, std::vector<double>> values;  ///< field -> one value per run
  std::vector<double> wall_ms;

  double median_of(const std::string& field) const {
    const auto found = values.find(field);
    return found == values.end() ? std::nan("") : median(found->second);
  }
};

/// One child run; its numeric fields join the variant's.
void run_child(Variant& variant, const std::string& cache_dir) {
  // Why drop these: the children measure kiln's defaults on a given folder; a dump or a disabled
  // cache in the caller's environment would change what is measured.
  const auto env =
      child_environment({"KILN_CACHE_DIR", "KILN_CACHE", "KILN_DUMP_DIR"}, {"KILN_CACHE_DIR=" + cache_dir});
  std::vector<std::string> args{"child"};
  args.insert(args.end(), variant.args.begin(), variant.args.end());
  const ChildRun run = run_self(args, env);
  if (run.exit_status != 0)
    throw_error("bench: the '" + variant.id + "' child exited with status " + std::to_string(run.exit_status) +
                " (its messages are above)");
  const auto newline = run.output.find_last_of('\n', run.output.size() >= 2 ? run.output.size() - 2 : 0);
  const std::string line = newline == std::string::npos ? run.output : run.output.substr(newline + 1);
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(line);
  } catch (const std::exception& e) {
    throw_error("bench: the '" + variant.id + "' child printed no JSON line (" + e.what() + "): " + run.output);
  }
  for (const auto& [field, value] : parsed.items())
    if (value.is_number())
      variant.values[field].push_back(value.get<double>());
    else if (value.is_boolean())
      variant.values[field].push_back(value.get<bool>() ? 1 : 0);
  variant.wall_ms.push_back(run.wall_ms);
}

std::string cell(const Variant& variant, const std::string& field, int decimals) {
  return fixed(variant.median_of(field), decimals);
}

}  // namespace

void run_jit_processes(const BenchPlan& plan, Report& report) {
  std::vector<Variant> variants{
      {"driver", "driver only (cuInit + primary context)", {"--mode", "driver"}, {}, {}},
      {"cold", "kiln cold (empty cache folder)", {"--mode", "jit"}, {}, {}},
      {"cold_driver_first", "kiln cold, driver up first", {"--mode", "jit", "--driver-first"}, {}, {}},
      {"warm", "kiln warm (disk hits), driver up first", {"--mode", "jit", "--driver-first"}, {}, {}},
  };
  Variant& driver = variants[0];
  Variant& cold = variants[1];
  Variant& cold_driver_first = variants[2];
  Variant& warm = variants[3];
  const TempDir temp("jit");
  for (int run = 0; run < plan.jit_runs; ++run) {
    const std::string n = std::to_string(run);
    run_child(driver, temp.subdir("driver-" + n));
    const std::string cold_dir = temp.subdir("cold-" + n);
    run_child(cold, cold_dir);
    run_child(warm, cold_dir);
    run_child(cold_driver_first, temp.subdir("cold-driver-first-" + n));
  }

  Table table;
  table.id = "jit";
  table.title = "JIT in fresh processes, ms, median of " + std::to_string(plan.jit_runs) +
                " runs each; times from the parent's spawn (CLOCK_MONOTONIC)";
  table.columns = {"variant",       "spawn->entry", "cuInit",    "context",      "Service()",    "group_quant()",
                   "NVRTC compile", "compiles",     "disk hits", "after driver", "spawn->ready", "process wall"};
  for (const auto& variant : variants) {
    const bool is_driver = &variant == &driver;
    nlohmann::json record{
        {"variant", variant.id}, {"runs", plan.jit_runs}, {"process_wall_ms", median(variant.wall_ms)}};
    for (const auto& [field, values] : variant.values) record[field] = median(values);
    table.add(
        {variant.label, cell(variant, "spawn_to_entry_ms", 1), cell(variant, "driver_ms", 1),
         cell(variant, "context_ms", 1), cell(variant, "service_ms", 2), cell(variant, "resolve_ms", 2),
         cell(variant, "compile_ms", 1), cell(variant, "compiles", 0), cell(variant, "disk_hits", 0),
         cell(variant, "after_driver_ms", 3), cell(variant, is_driver ? "spawn_to_ready_ms" : "spawn_to_handles_ms", 1),
         fixed(median(variant.wall_ms), 1)},
        std::move(record));
  }
  table.notes.push_back("spawn->ready: spawn to the primary context (driver only) or to the default variant's kernels (kiln)");
  table.notes.push_back(
      "NVRTC compile: the sum over the modules compiled (ModuleCacheCounters::compile_ms); "
      "group_quant() minus it is disk and module load");
  report.add(std::move(table));

  const double driver_ready = driver.median_of("spawn_to_ready_ms");
  const double cold_handles = cold.median_of("spawn_to_handles_ms");
  const double ratio = cold_handles / driver_ready;
  report.add_target({"driver start-up (cuInit + primary context), for reference",
                     cell(driver, "driver_ms", 1) + " + " + cell(driver, "context_ms", 1) + " ms; spawn to ready " +
                         fixed(driver_ready, 1) + " ms",
                     "-",
                     std::nullopt,
                     {{"spawn_to_ready_ms", driver_ready}}});
  report.add_target({"cold: process start to the default variant's kernels vs a process doing only driver start-up",
                     fixed(cold_handles, 1) + " vs " + fixed(driver_ready, 1) + " ms (" + fixed(ratio, 3) + "x); " +
                         cell(cold, "compiles", 0) + " compiles, " + cell(cold, "compile_ms", 1) + " ms NVRTC",
                     "<= 1.15x",
                     ratio <= 1.15,
                     {{"cold_ms", cold_handles},
                      {"driver_ms", driver_ready},
                      {"ratio", ratio},
                      {"compiles", cold.median_of("compiles")}}});
  const double warm_ms = warm.median_of("after_driver_ms");
  const double warm_hits = warm.median_of("disk_hits");
  const double warm_compiles = warm.median_of("compiles");
  report.add_target(
      {"warm process (disk hit): the default variant's kernels after the driver is up",
       fixed(warm_ms, 3) + " ms (" + fixed(warm_hits, 0) + " disk hits, " + fixed(warm_compiles, 0) + " compiles)",
       "<= 1 ms, from disk",
       warm_ms <= 1 && warm_compiles == 0,
       {{"ms", warm_ms}, {"disk_hits", warm_hits}, {"compiles", warm_compiles}}});
}

}  // namespace kiln::bench

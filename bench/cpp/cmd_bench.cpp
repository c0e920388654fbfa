// kiln bench: the whole benchmark in one run. Host parts (pick_with, NVRTC, disk cache) run
// anywhere; the GPU parts (JIT processes, launch costs, ceiling, arms, decode, floor) need GPU 0,
// and without one `kiln bench` says so and exits 77 after the host parts.
#include <ctime>
#include <fstream>
#include <thread>

#include "bench_device.hpp"
#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "commands.hpp"
#include "driver/cuda_backend.hpp"
#include "jit/nvrtc.hpp"
#include "kiln/ops/fp8_act_quant_floor.hpp"
#include "kiln/version.hpp"

namespace kiln::cli {

namespace {

constexpr int EXIT_SKIPPED = 77;

struct BenchArgs {
  std::string json;
  std::string only;
  bool quick = false;
};

struct ChildArgs {
  std::string mode;
  bool driver_first = false;
  std::int64_t spawned_at = 0;
};

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

/// The kernel module's own line ("NVRM version: ... 580.159.03 ..."), when the system shows it.
std::string kernel_driver_line() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  return line;
}

void describe_host(bench::Report& report, const bench::BenchPlan& plan) {
  auto& env = report.environment();
  env["date"] = utc_now();
  env["kiln"] = std::string(version_string());
  const auto nvrtc = nvrtc_version();
  env["nvrtc"] = nvrtc ? nlohmann::json(nvrtc->str()) : nlohmann::json(nullptr);
  env["cpus"] = std::thread::hardware_concurrency();
  env["quick"] = plan.quick;
  env["lever_KILN_FP8_ACT_QUANT_HOPPER"] = ops::fp8_act_quant_hopper_enabled();
}

void describe_gpu(bench::Report& report, const DriverStatus& status, bench::GpuSession* gpu) {
  auto& env = report.environment();
  env["driver_api"] = status.version ? nlohmann::json(status.version->str()) : nlohmann::json(nullptr);
  env["driver_text"] = kernel_driver_line();
  if (gpu == nullptr) return;
  const auto& device = gpu->backend().device();
  env["gpu"] = device.name;
  env["compute_capability"] = std::to_string(device.cc.major) + "." + std::to_string(device.cc.minor);
  env["sm_count"] = device.sm_count;
  env["l2_bytes"] = gpu->l2_bytes();
  env["target"] = gpu->backend().target()->name();
  env["twin_present"] = gpu->quant().twin_present();
}

/// Runs the parts `args.only` selects; returns the reason the GPU parts were skipped, if they were.
std::string run_parts(const BenchArgs& args, const bench::BenchPlan& plan, bench::Report& report) {
  const bool all = args.only.empty();
  if (all || args.only == "host") {
    bench::run_host(plan, report);
    bench::run_disk(plan, report);
    bench::run_remote(plan, report);
  }
  const bool jit = all || args.only == "jit", gpu_parts = all || args.only == "gpu";
  const bool decode_only = args.only == "decode";
  if (!jit && !gpu_parts && !decode_only) return {};
  const DriverStatus status = driver_status();
  if (!status.available || status.devices.empty()) {
    const std::string reason =
        "no usable GPU: " + (status.available ? std::string("the driver reports no devices") : status.reason);
    describe_gpu(report, status, nullptr);
    report.skip(jit && gpu_parts ? "jit and gpu" : (jit ? "jit" : args.only), reason);
    return reason;
  }
  // Why first: the fresh processes should start before this one holds a context and gigabytes.
  if (jit) bench::run_jit_processes(plan, report);
  bench::GpuSession gpu;
  describe_gpu(report, status, &gpu);
  if (jit) bench::run_launch(plan, gpu, report);
  if (gpu_parts) {
    const double ceiling_gbps = bench::run_gpu(plan, gpu, report);
    bench::run_decode(plan, gpu, report);
    bench::run_variants(plan, gpu, ceiling_gbps, report);
  } else if (decode_only) {
    bench::run_decode(plan, gpu, report);
  }
  return {};
}

void run_bench(const BenchArgs& args) {
  const bench::BenchPlan plan = bench::BenchPlan::make(args.quick);
  bench::Report report;
  describe_host(report, plan);
  std::string skipped;
  try {
    skipped = run_parts(args, plan, report);
  } catch (const std::exception& e) {
    // Why: what was measured before the failure is still worth having in the JSON.
    report.environment()["error"] = e.what();
    if (!args.json.empty()) report.write_json(args.json);
    throw;
  }
  report.print_targets();
  if (!args.json.empty()) report.write_json(args.json);
  if (!skipped.empty()) {
    // Why only without --only: --only jit, gpu or decode runs no host part.
    std::fprintf(stderr, "kiln bench: %s; the GPU parts need one%s\n", skipped.c_str(),
                 args.only.empty() ? " (the host parts above ran)" : "");
    set_exit_code(EXIT_SKIPPED);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench",
                                 "Measure kiln on this machine: bandwidth, decode launches, JIT cold/warm, "
                                 "caches (exit 77 without a GPU, after the host parts)");
  cmd->add_option("--json", args->json, "Also write every measurement to FILE as JSON");
  cmd->add_flag("--quick", args->quick, "Fewer iterations (same shapes)");
  cmd->add_option("--only", args->only,
                  "Run one part: host (CPU only), jit, gpu, or decode (the gpu part's decode table alone)")
      ->check(CLI::IsMember({"host", "jit", "gpu", "decode"}));
  cmd->callback([args] { run_bench(*args); });

  // The fresh process of the JIT part; hidden (empty group), started by `kiln bench` itself.
  auto child = std::make_shared<ChildArgs>();
  auto* hidden = app.add_subcommand("bench-child", "Internal: one fresh process of kiln bench's JIT part");
  hidden->group("");
  hidden->add_option("--mode", child->mode, "driver or jit")->required()->check(CLI::IsMember({"driver", "jit"}));
  hidden->add_flag("--driver-first", child->driver_first, "Bring the driver up before kiln");
  hidden->add_option("--spawned-at", child->spawned_at, "The parent's CLOCK_MONOTONIC ns at spawn")->required();
  hidden->callback([child] { bench::run_jit_child(child->mode, child->driver_first, child->spawned_at); });
}

}  // namespace kiln::cli

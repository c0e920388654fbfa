// kiln-bench: the whole benchmark in one run, a development program that is never installed. Host
// parts (pick_with, NVRTC, disk cache) run anywhere; the GPU parts (JIT processes, launch costs,
// ceiling, arms, decode, floor) need GPU 0, and without one it says so and exits 77 after the host
// parts.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "bench_device.hpp"
#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "runtime/cuda_backend.hpp"
#include "jit/nvrtc.hpp"
#include "ops/fp8_act_quant_floor.hpp"
#include "kiln/version.hpp"

namespace kiln::bench {

namespace {

constexpr int EXIT_SKIPPED = 77;
constexpr int EXIT_FAILED = 1;
constexpr int EXIT_USAGE = 2;

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

void describe_host(Report& report, const BenchPlan& plan) {
  auto& env = report.environment();
  env["date"] = utc_now();
  env["kiln"] = std::string(version_string());
  const auto nvrtc = nvrtc_version();
  env["nvrtc"] = nvrtc ? nlohmann::json(nvrtc->str()) : nlohmann::json(nullptr);
  env["cpus"] = std::thread::hardware_concurrency();
  env["quick"] = plan.quick;
  env["lever_KILN_FP8_ACT_QUANT_HOPPER"] = ops::fp8_act_quant_hopper_enabled();
}

void describe_gpu(Report& report, const DriverStatus& status, GpuSession* gpu) {
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
std::string run_parts(const BenchArgs& args, const BenchPlan& plan, Report& report) {
  const bool all = args.only.empty();
  if (all || args.only == "host") {
    run_host(plan, report);
    run_disk(plan, report);
    run_remote(plan, report);
  }
  const bool jit = all || args.only == "jit", gpu_parts = all || args.only == "gpu";
  const bool decode_only = args.only == "decode", moe_only = args.only == "moe";
  if (!jit && !gpu_parts && !decode_only && !moe_only) return {};
  const DriverStatus status = driver_status();
  if (!status.available || status.devices.empty()) {
    const std::string reason =
        "no usable GPU: " + (status.available ? std::string("the driver reports no devices") : status.reason);
    describe_gpu(report, status, nullptr);
    report.skip(jit && gpu_parts ? "jit and gpu" : (jit ? "jit" : args.only), reason);
    return reason;
  }
  // Why first: the fresh processes should start before this one holds a context and gigabytes.
  if (jit) run_jit_processes(plan, report);
  GpuSession gpu;
  describe_gpu(report, status, &gpu);
  if (jit) run_launch(plan, gpu, report);
  if (gpu_parts) {
    const double ceiling_gbps = run_gpu(plan, gpu, report);
    run_decode(plan, gpu, report);
    run_variants(plan, gpu, ceiling_gbps, report);
    run_moe(plan, gpu, report);
  } else if (decode_only) {
    run_decode(plan, gpu, report);
  } else if (moe_only) {
    run_moe(plan, gpu, report);
  }
  return {};
}

/// Returns the exit status: 0, or 77 when the GPU parts were skipped for want of a GPU.
int run_bench(const BenchArgs& args) {
  const BenchPlan plan = BenchPlan::make(args.quick);
  Report report;
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
    std::fprintf(stderr, "kiln-bench: %s; the GPU parts need one%s\n", skipped.c_str(),
                 args.only.empty() ? " (the host parts above ran)" : "");
    return EXIT_SKIPPED;
  }
  return 0;
}

}  // namespace

}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln::bench;
  CLI::App app{"kiln-bench: measure kiln on this machine: bandwidth, decode launches, JIT cold/warm, caches "
               "(exit 77 without a GPU, after the host parts)"};
  app.set_version_flag("--version", std::string(kiln::version_string()));
  BenchArgs args;
  app.add_option("--json", args.json, "Also write every measurement to FILE as JSON");
  app.add_flag("--quick", args.quick, "Fewer iterations (same shapes)");
  app.add_option("--only", args.only,
                 "Run one part: host (CPU only), jit, gpu, or decode or moe (one table of the gpu part alone)")
      ->check(CLI::IsMember({"host", "jit", "gpu", "decode", "moe"}));
  // The fresh process of the JIT part; hidden (empty group), started by kiln-bench itself.
  ChildArgs child;
  auto* hidden = app.add_subcommand("child", "Internal: one fresh process of the JIT part");
  hidden->group("");
  hidden->add_option("--mode", child.mode, "driver or jit")->required()->check(CLI::IsMember({"driver", "jit"}));
  hidden->add_flag("--driver-first", child.driver_first, "Bring the driver up before kiln");
  hidden->add_option("--spawned-at", child.spawned_at, "The parent's CLOCK_MONOTONIC ns at spawn")->required();
  try {
    app.parse(argc, argv);
    if (hidden->parsed()) {
      run_jit_child(child.mode, child.driver_first, child.spawned_at);
      return 0;
    }
    return run_bench(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "kiln-bench: %s\nRun 'kiln-bench --help' for the options.\n", e.what());
    return EXIT_USAGE;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-bench: %s\n", e.what());
    return EXIT_FAILED;
  }
}

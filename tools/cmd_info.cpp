// kiln info: what this machine offers kiln (NVRTC, driver, GPUs and their targets, levers, caches).
// The diagnostic command: a bad setting is reported with everything else, then exit status 1.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/config.hpp"
#include "base/log.hpp"
#include "cache/disk/disk_cache.hpp"
#include "runtime/module_provider.hpp"
#include "cache/remote/remote_cache.hpp"
#include "cache/remote/remote_config.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "runtime/cuda_backend.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "info_deploy.hpp"
#include "jit/registry.hpp"
#include "ops/fp8_act_quant_floor.hpp"
#include "kiln/ops/group_quant_pick.hpp"
#include "kiln/ops/quant_launch_options.hpp"
#include "kiln/version.hpp"

namespace kiln::cli {

namespace {

std::string version_text(const std::optional<Version>& version) { return version ? version->str() : "none"; }

void add_counters(ModuleCacheCounters& sum, const ModuleCacheCounters& more) {
  sum.memory_hits += more.memory_hits;
  sum.lock_waits += more.lock_waits;
  sum.disk_hits += more.disk_hits;
  sum.compiles += more.compiles;
  sum.compile_ms += more.compile_ms;
  sum.load_refused += more.load_refused;
  sum.failures += more.failures;
}

/// KILN_ARCH, checked without throwing: `info` is where a person looks when a setting is wrong, so
/// a bad value is reported beside everything else instead of replacing it.
struct ArchSetting {
  std::optional<Target> target;
  std::string error;  ///< non-empty: the value is invalid
};

ArchSetting arch_setting(const std::vector<int>& archs) {
  ArchSetting setting;
  try {
    setting.target = target_override_from_env();
  } catch (const std::exception& e) {
    std::string supported;
    for (int arch : archs) supported += (supported.empty() ? "" : " ") + std::to_string(arch);
    std::string detail = e.what();
    if (detail.rfind("KILN_ARCH: ", 0) == 0) detail.erase(0, 11);
    setting.error = "KILN_ARCH: invalid '" + process_config().arch.value_or("") +
                    "' (expected sm_XY[a] or compute_XY[a] that NVRTC supports: " + supported + "): " + detail;
  }
  return setting;
}

/// Every setting of the configuration, keyed by its variable; null: unset. The remote URL is shown
/// redacted (SECURITY.md: no secret is ever printed).
nlohmann::json config_json(const Config& config) {
  auto text = [](const std::optional<std::string>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  return {
      {"KILN_LOG_LEVEL", config.log_level},
      {"KILN_JIT", config.jit},
      {"KILN_ARCH", text(config.arch)},
      {"KILN_LINEINFO", config.lineinfo},
      {"KILN_DUMP_DIR", text(config.dump_dir)},
      {"KILN_NVRTC_LIBRARY", text(config.nvrtc_library)},
      {"KILN_CACHE", config.cache},
      {"KILN_CACHE_DIR", text(config.cache_dir)},
      {"KILN_CACHE_PATH", text(config.cache_path)},
      {"KILN_CACHE_MAX_BYTES", config.cache_max_bytes},
      {"KILN_REMOTE_CACHE", config.remote_cache ? nlohmann::json(redact_url(*config.remote_cache)) : nullptr},
      {"KILN_REMOTE_CACHE_KEY_FILE", text(config.remote_cache_key_file)},
      {"KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS", config.remote_cache_connect_timeout.count()},
      {"KILN_REMOTE_CACHE_TIMEOUT_MS", config.remote_cache_timeout.count()},
      {"KILN_REMOTE_CACHE_LEASE_MS", config.remote_cache_lease.count()},
      {"KILN_REMOTE_CACHE_WAIT_MS", config.remote_cache_wait.count()},
      {"KILN_REMOTE_CACHE_RETRY_MS", config.remote_cache_retry.count()},
      {"KILN_FP8_ACT_QUANT_HOPPER", config.fp8_act_quant_hopper},
      {"KILN_Q_ONE_GROUP", config.q_one_group},
      {"KILN_PDL", config.pdl},
      {"KILN_PREFETCH", config.prefetch},
      {"HOME", text(config.home)},
      {"XDG_CACHE_HOME", text(config.xdg_cache_home)},
      {"LD_LIBRARY_PATH", text(config.ld_library_path)},
      {"VIRTUAL_ENV", text(config.virtual_env)},
      {"CONDA_PREFIX", text(config.conda_prefix)},
  };
}

TargetChoice default_target_choice_or(const DeviceInfo& device, std::optional<Version> driver,
                                      const ArchSetting& arch) {
  if (arch.error.empty()) return default_target_choice(device, driver);
  const TargetChoice own = select_target(TargetInputs{device.cc, nvrtc_supported_archs(), nvrtc_version(), driver});
  return TargetChoice{std::nullopt, "none while KILN_ARCH is invalid; without it: " +
                                        (own.target ? own.target->name() + ", " : std::string()) + own.reason};
}

nlohmann::json info_json() {
  // Why not asked with KILN_JIT=off or no NVRTC: asking loads NVRTC, which such a process never does.
  const bool ask_nvrtc = !compiler_not_asked();
  const auto nvrtc = ask_nvrtc ? nvrtc_version() : std::nullopt;
  const auto archs = ask_nvrtc ? nvrtc_supported_archs() : std::vector<int>{};
  const ArchSetting arch = arch_setting(archs);
  const DriverStatus driver = driver_status();
  auto devices = nlohmann::json::array();
  ModuleCacheCounters memory;
  for (const auto& device : driver.devices) {
    // Why not default_target_choice with a bad KILN_ARCH: it throws, and a Service would too; the
    // device's own target still tells the person what kiln would do once the setting is fixed.
    const TargetChoice choice = default_target_choice_or(device, driver.version, arch);
    // What a runtime embedding kiln gets on this device: the quantizer resolved through the caches.
    nlohmann::json quantizer = nullptr;
    if (choice.target) {
      Service service(device.ordinal);
      const auto& quant = service.fp8_act_quant();
      quantizer = {{"shared", quant.shared().loaded()}, {"twin", quant.twin_present()}};
      add_counters(memory, service.counters().memory);
    }
    devices.push_back({{"ordinal", device.ordinal}, {"name", device.name},
                       {"compute_capability", std::to_string(device.cc.major) + "." + std::to_string(device.cc.minor)},
                       {"sm_count", device.sm_count},
                       {"target", choice.target ? nlohmann::json(choice.target->name()) : nlohmann::json(nullptr)},
                       {"target_kind", choice.target ? std::string(to_string(choice.target->kind)) : ""},
                       {"hopper_family", choice.target && choice.target->carries("hopper")},
                       {"target_reason", choice.reason},
                       {"fp8_act_quant", quantizer}});
  }
  // Why the process's cache rather than a DiskCache of our own: each one checks the folder and
  // warns, so a second instance printed every cache warning twice.
  const auto cache = process_disk_cache();
  const auto status = cache->status();
  auto problems = nlohmann::json::array();
  if (!arch.error.empty()) problems.push_back(arch.error);
  const auto remote = process_remote_cache();
  const auto remote_status = remote->status();
  if (!remote_status.reason.empty()) problems.push_back("remote cache not used: " + remote_status.reason);
  return {
      {"kiln", std::string(version_string())},
      {"nvrtc", {{"version", version_text(nvrtc)}, {"archs", archs}}},
      {"driver",
       {{"available", driver.available}, {"version", version_text(driver.version)}, {"reason", driver.reason}}},
      {"devices", devices},
      {"default_target", arch.error.empty() ? nlohmann::json(auto_target().name()) : nlohmann::json(nullptr)},
      {"modules", embedded_modules().size()},
      {"disk_cache", {{"mode", std::string(to_string(status.mode))}, {"dir", status.dir}, {"reason", status.reason},
                      {"max_bytes", cache->config().max_bytes}}},
      {"levers",
       {{"KILN_FP8_ACT_QUANT_HOPPER", ops::fp8_act_quant_hopper_enabled()}, {"KILN_Q_ONE_GROUP", ops::quant_one_group_lever()},
        {"KILN_PDL", ops::pdl_lever()}, {"KILN_LINEINFO", lineinfo_from_env()},
        {"KILN_ARCH", arch.target ? arch.target->name() : process_config().arch.value_or("")}}},
      {"config", config_json(process_config())},
      {"remote_cache", {{"enabled", remote_status.enabled}, {"requested", remote_status.requested},
                        {"endpoint", remote_status.endpoint},
                        {"signed", remote_status.signed_entries}, {"reason", remote_status.reason}}},
      {"counters", counters_json(ServiceCounters{memory, cache->counters(), remote->counters()})},
      {"nvrtc_found", nvrtc_found_json()},
      {"cache_path", cache_path_json()},
      {"problems", problems},
  };
}

void print_info(const nlohmann::json& info) {
  std::printf("kiln %s\n", info["kiln"].get<std::string>().c_str());
  std::string archs;
  for (int arch : info["nvrtc"]["archs"]) archs += (archs.empty() ? "" : " ") + std::to_string(arch);
  if (info["nvrtc_found"]["loaded"].get<bool>() || info["nvrtc"]["version"] != "none")
    std::printf("NVRTC %s, archs: %s\n", info["nvrtc"]["version"].get<std::string>().c_str(), archs.c_str());
  else
    std::printf("NVRTC not loaded (see below)\n");
  if (info["driver"]["available"].get<bool>())
    std::printf("driver: CUDA %s\n", info["driver"]["version"].get<std::string>().c_str());
  else
    std::printf("driver: not available: %s\n", info["driver"]["reason"].get<std::string>().c_str());
  if (info["devices"].empty())
    std::printf("GPUs: none; default target %s\n",
                info["default_target"].is_null() ? "none (KILN_ARCH is invalid)"
                                                 : info["default_target"].get<std::string>().c_str());
  for (const auto& device : info["devices"])
    std::printf("GPU %d: %s, compute capability %s, %u SMs, target %s (%s)\n", device["ordinal"].get<int>(),
                device["name"].get<std::string>().c_str(), device["compute_capability"].get<std::string>().c_str(),
                device["sm_count"].get<unsigned>(),
                device["target"].is_null() ? "none" : device["target"].get<std::string>().c_str(),
                device["target_reason"].get<std::string>().c_str());
  for (const auto& device : info["devices"])
    if (!device["fp8_act_quant"].is_null())
      std::printf("GPU %d: fp8 quantizer: shared kernel %s, Hopper twin %s\n", device["ordinal"].get<int>(),
                  device["fp8_act_quant"]["shared"].get<bool>() ? "loaded" : "unavailable",
                  device["fp8_act_quant"]["twin"].get<bool>() ? "loaded" : "unavailable");
  const auto& counters = info["counters"];
  std::printf("this process: %llu compiles, %llu disk hits, %llu memory hits\n",
              counters["compiles"].get<unsigned long long>(), counters["disk_hits"].get<unsigned long long>(),
              counters["memory_hits"].get<unsigned long long>());
  const auto& cache = info["disk_cache"];
  std::printf("disk cache: %s %s%s%s\n", cache["mode"].get<std::string>().c_str(), cache["dir"].get<std::string>().c_str(),
              cache["reason"].get<std::string>().empty() ? "" : ": ", cache["reason"].get<std::string>().c_str());
  const auto& remote = info["remote_cache"];
  if (remote["enabled"].get<bool>())
    std::printf("remote cache: %s, %s entries; this process: %llu remote hits\n",
                remote["endpoint"].get<std::string>().c_str(), remote["signed"].get<bool>() ? "signed" : "unsigned",
                counters["remote"]["hits"].get<unsigned long long>());
  else
    std::printf("remote cache: off%s%s\n", remote["reason"].get<std::string>().empty() ? " (KILN_REMOTE_CACHE unset)" : ": ",
                remote["reason"].get<std::string>().c_str());
  std::printf("embedded modules: %zu\n", info["modules"].get<std::size_t>());
  print_deploy_info(info, !info["devices"].empty() && !info["devices"][0]["target"].is_null()
                              ? info["devices"][0]["target"].get<std::string>()
                              : info["default_target"].is_null() ? std::string() : info["default_target"].get<std::string>());
  const auto& levers = info["levers"];
  std::printf("levers: KILN_FP8_ACT_QUANT_HOPPER=%d KILN_Q_ONE_GROUP=%d KILN_PDL=%d KILN_LINEINFO=%d KILN_ARCH=%s\n",
              levers["KILN_FP8_ACT_QUANT_HOPPER"].get<bool>() ? 1 : 0, levers["KILN_Q_ONE_GROUP"].get<bool>() ? 1 : 0,
              levers["KILN_PDL"].get<bool>() ? 1 : 0, levers["KILN_LINEINFO"].get<bool>() ? 1 : 0,
              levers["KILN_ARCH"].get<std::string>().empty() ? "(unset)" : levers["KILN_ARCH"].get<std::string>().c_str());
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show NVRTC, driver, GPUs and their targets, the disk cache and levers");
  auto* json = cmd->add_flag("--json", "Print JSON");
  cmd->callback([json] {
    const auto info = info_json();
    if (*json)
      std::printf("%s\n", info.dump(2).c_str());
    else
      print_info(info);
    // Why last: everything above is still worth reading when a setting is bad.
    // Why the check: a problem whose cause this process already printed in a warning (a key file
    // that stops both the bundles and the remote tier) is not said twice; the exit status stays.
    for (const auto& problem : info["problems"]) {
      const std::string text = problem.get<std::string>();
      const auto colon = text.find(": ");
      if (!warned_about(colon == std::string::npos ? text : text.substr(colon + 2)))
        std::fprintf(stderr, "kiln: %s\n", text.c_str());
    }
    if (!info["problems"].empty()) set_exit_code(EXIT_FAILED);
  });
}

}  // namespace kiln::cli

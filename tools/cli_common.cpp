#include "cli_common.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "jit/nvrtc.hpp"
#include "jit/variants.hpp"
#include "kiln/error.hpp"

namespace kiln::cli {

std::vector<Target> requested_targets(const std::string& arch) {
  const auto archs = nvrtc_supported_archs();
  if (arch == "all") {
    if (archs.empty()) throw_error("--arch all: NVRTC reported no supported archs");
    return nvrtc_targets(archs);
  }
  if (arch == "auto") return {auto_target()};
  try {
    return {parse_supported_target(arch, archs, "--arch")};
  } catch (const Error& e) {
    // Why re-thrown: a bad --arch is the command line's fault (exit 2), unlike a bad KILN_ARCH.
    throw CLI::ValidationError(e.what());
  }
}

void parallel_for(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> next{0};
  const auto drain = [&] {
    for (std::size_t i; (i = next++) < count;) work(i);
  };
  std::vector<std::thread> workers;
  for (unsigned t = 1; t < std::min<std::size_t>(threads, count); ++t) workers.emplace_back(drain);
  drain();
  for (auto& worker : workers) worker.join();
}

nlohmann::json counters_json(const ServiceCounters& counters) {
  const ModuleCacheCounters& memory = counters.memory;
  const DiskCacheCounters& disk = counters.disk;
  return {{"memory_hits", memory.memory_hits},   {"disk_hits", disk.disk_hits},
          {"compiles", disk.compiles},           {"compile_ms", memory.compile_ms},
          {"corrupt_healed", disk.corrupt_healed}, {"lock_waits", disk.lock_waits + memory.lock_waits},
          {"lock_timeouts", disk.lock_timeouts}, {"evictions", disk.evictions},
          {"load_refused", memory.load_refused}, {"store_failures", disk.store_failures},
          {"failures", memory.failures},         {"remote", remote_counters_json(counters.remote)}};
}

nlohmann::json remote_counters_json(const RemoteCacheCounters& remote) {
  nlohmann::json out = nlohmann::json::object();
  for_each_counter(remote, [&](const char* name, std::uint64_t value) { out[name] = value; });
  return out;
}

std::vector<const KernelSource*> variant_manifest_sources(const std::string& path) {
  std::vector<const KernelSource*> sources;
  try {
    for (const Variant& variant : read_variant_manifest(path)) sources.push_back(&variant_source(variant));
  } catch (const Error& error) {
    throw CLI::ValidationError("--variants", error.what());
  }
  return sources;
}

}  // namespace kiln::cli

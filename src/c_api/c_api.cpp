// kiln.h: version, services, device info, kernel handles and cache counters.
#include <cstddef>
#include <memory>
#include <string>

#include "c_boundary.hpp"
#include "c_service.hpp"
#include "cache/remote/remote_cache.hpp"
#include "kiln/version.hpp"

using kiln::c_api::copy_text;
using kiln::c_api::guarded;
using kiln::c_api::require_pointer;
using kiln::c_api::require_struct;
using kiln::c_api::write_struct;

static_assert(sizeof(kiln_device_info) == KILN_DEVICE_INFO_V1_SIZE, "kiln_device_info v1 layout changed");
static_assert(sizeof(kiln_cache_stats) == KILN_CACHE_STATS_V2_SIZE, "kiln_cache_stats v2 layout changed");
static_assert(offsetof(kiln_cache_stats, remote_enabled) == KILN_CACHE_STATS_V1_SIZE, "v2 fields follow v1");

namespace {

// "0.1.0" -> {0, 1, 0}; throws on anything else (a broken build).
void parse_version(std::string_view text, std::uint32_t (&parts)[3]) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    std::uint32_t value = 0;
    const std::size_t start = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') value = value * 10 + (text[at++] - '0');
    const bool separator_ok = i < 2 ? at < text.size() && text[at] == '.' : at == text.size();
    if (at == start || !separator_ok) kiln::throw_error("kiln version '" + std::string(text) + "' is not MAJOR.MINOR.PATCH");
    parts[i] = value;
    ++at;
  }
}

kiln_status try_kernel_with(kiln_service* service, const char* module, const char* entry, std::uint64_t* handle,
                            bool target_only) {
  if (handle != nullptr) *handle = 0;
  return guarded([&] {
    require_pointer(service, "service");
    require_pointer(module, "module");
    require_pointer(entry, "entry");
    require_pointer(handle, "handle");
    auto& backend = service->service.backend();
    *handle = (target_only ? backend.try_target_kernel(module, entry) : backend.try_kernel(module, entry)).raw;
  });
}

std::int32_t disk_mode_code(kiln::DiskCacheMode mode) {
  switch (mode) {
    case kiln::DiskCacheMode::disabled: return KILN_DISK_CACHE_DISABLED;
    case kiln::DiskCacheMode::memory_only: return KILN_DISK_CACHE_MEMORY_ONLY;
    case kiln::DiskCacheMode::read_write: return KILN_DISK_CACHE_READ_WRITE;
  }
  kiln::throw_error("unknown disk cache mode");
}

}  // namespace

extern "C" kiln_status kiln_version(std::uint32_t* major, std::uint32_t* minor, std::uint32_t* patch) {
  return guarded([&] {
    require_pointer(major, "major");
    require_pointer(minor, "minor");
    require_pointer(patch, "patch");
    std::uint32_t parts[3];
    parse_version(kiln::version_string(), parts);
    *major = parts[0];
    *minor = parts[1];
    *patch = parts[2];
  });
}

extern "C" kiln_status kiln_abi_version(std::uint32_t* abi) {
  return guarded([&] {
    require_pointer(abi, "abi");
    *abi = KILN_ABI_VERSION;
  });
}

extern "C" kiln_status kiln_service_create(std::int32_t ordinal, kiln_service** out) {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    require_pointer(out, "out");
    *out = std::make_unique<kiln_service>(ordinal).release();
  });
}

extern "C" kiln_status kiln_service_destroy(kiln_service* service) {
  return guarded([&] { delete service; });
}

extern "C" kiln_status kiln_service_device_info(const kiln_service* service, kiln_device_info* out) {
  return guarded([&] {
    require_pointer(service, "service");
    require_struct(out, "out", KILN_DEVICE_INFO_V1_SIZE);
    const kiln::CudaBackend& backend = service->service.backend();
    const kiln::DeviceInfo& device = backend.device();
    kiln_device_info info{};
    info.ordinal = device.ordinal;
    info.cc_major = device.cc.major;
    info.cc_minor = device.cc.minor;
    info.sm_count = device.sm_count;
    info.available = backend.available() ? 1 : 0;
    copy_text(info.name, device.name);
    copy_text(info.target, backend.target() ? backend.target()->name() : std::string());
    copy_text(info.reason, backend.unavailable_reason());
    write_struct(out, info);
  });
}

extern "C" kiln_status kiln_try_kernel(kiln_service* service, const char* module, const char* entry,
                                       std::uint64_t* handle) {
  return try_kernel_with(service, module, entry, handle, false);
}

extern "C" kiln_status kiln_try_target_kernel(kiln_service* service, const char* module, const char* entry,
                                              std::uint64_t* handle) {
  return try_kernel_with(service, module, entry, handle, true);
}

extern "C" kiln_status kiln_service_cache_stats(const kiln_service* service, kiln_cache_stats* out) {
  return guarded([&] {
    require_pointer(service, "service");
    require_struct(out, "out", KILN_CACHE_STATS_V1_SIZE);
    const kiln::ServiceCounters counters = service->service.counters();
    const kiln::ModuleCacheCounters& memory = counters.memory;
    const kiln::DiskCacheCounters& disk = counters.disk;
    kiln_cache_stats stats{};
    stats.disk_mode = disk_mode_code(service->service.disk()->status().mode);
    stats.memory_hits = memory.memory_hits;
    stats.memory_lock_waits = memory.lock_waits;
    stats.disk_loads = memory.disk_hits;
    stats.compiles = memory.compiles;
    stats.load_refused = memory.load_refused;
    stats.failures = memory.failures;
    stats.compile_ms = memory.compile_ms;
    stats.disk_hits = disk.disk_hits;
    stats.disk_misses = disk.disk_misses;
    stats.disk_compiles = disk.compiles;
    stats.corrupt_healed = disk.corrupt_healed;
    stats.rejected = disk.rejected;
    stats.disk_lock_waits = disk.lock_waits;
    stats.lock_timeouts = disk.lock_timeouts;
    stats.lock_failures = disk.lock_failures;
    stats.evictions = disk.evictions;
    stats.store_failures = disk.store_failures;
    const auto remote = kiln::process_remote_cache()->status();
    const kiln::RemoteCacheCounters& tier = counters.remote;
    stats.remote_enabled = remote.enabled ? 1 : 0;
    stats.remote_signed = remote.enabled && remote.signed_entries ? 1 : 0;
    stats.remote_hits = tier.remote_hits;
    stats.remote_misses = tier.remote_misses;
    stats.remote_compiles = tier.compiles;
    stats.remote_publishes = tier.publishes;
    stats.remote_publish_lost = tier.publish_lost;
    stats.remote_lease_waits = tier.lease_waits;
    stats.remote_lease_takeovers = tier.lease_takeovers;
    stats.remote_wait_timeouts = tier.wait_timeouts;
    stats.remote_signature_failures = tier.signature_mismatch;
    stats.remote_corrupt = tier.corrupt;
    stats.remote_timeouts = tier.timeouts;
    stats.remote_errors = tier.errors;
    stats.remote_skipped = tier.skipped;
    write_struct(out, stats);
  });
}

#include "cache/disk/disk_cache.hpp"

#include <algorithm>
#include <ctime>
#include <unordered_set>

#include <sys/stat.h>
#include <unistd.h>

#include "base/log.hpp"
#include "jit/nvrtc.hpp"
#include "cache_folder.hpp"
#include "cache_names.hpp"
#include "cache_scan.hpp"
#include "entry_file.hpp"
#include "file_lock.hpp"

namespace kiln {

namespace {

using detail::CacheFileKind;
using detail::EntryRead;

constexpr int touch_interval_s = 60;         // LRU recency needs no finer grain than a minute
constexpr std::time_t stale_temp_s = 10 * 60;  // no live writer takes this long for one entry

std::string_view stem_of(const std::string& name, std::string_view suffix) {
  return std::string_view(name).substr(0, name.size() - suffix.size());
}

bool older(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

}  // namespace

std::string_view to_string(DiskCacheMode mode) {
  switch (mode) {
    case DiskCacheMode::disabled: return "disabled";
    case DiskCacheMode::memory_only: return "memory-only";
    case DiskCacheMode::read_write: return "read-write";
  }
  return "unknown";
}

std::string_view to_string(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::hit: return "hit";
    case CacheOutcome::hit_after_wait: return "hit after wait";
    case CacheOutcome::compiled: return "compiled";
    case CacheOutcome::compiled_without_lock: return "compiled without lock";
  }
  return "unknown";
}

DiskCache::DiskCache(DiskCacheConfig config) : config_(std::move(config)) {
  if (!config_.dir) {
    reason_ = config_.disabled_reason.empty() ? "no cache folder configured" : config_.disabled_reason;
    logger().debug("disk cache disabled: {}", reason_);
    return;
  }
  auto folder = detail::open_cache_folder(*config_.dir);
  mode_ = folder.mode;
  if (mode_ != DiskCacheMode::read_write) {
    reason_ = std::move(folder.reason);
    logger().warn("disk cache not used, compiled kernels stay in memory only: {}", reason_);
    return;
  }
  dir_fd_ = folder.fd.release();
  logger().debug("disk cache in '{}' (max {} bytes)", *config_.dir, config_.max_bytes);
}

DiskCache DiskCache::from_env(std::optional<Version> nvrtc) { return DiskCache(DiskCacheConfig::from_env(nvrtc)); }

DiskCache::~DiskCache() {
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

DiskCacheStatus DiskCache::status() const { return {mode_, config_.dir.value_or(""), reason_}; }

DiskCacheCounters DiskCache::counters() const {
  DiskCacheCounters out;
  out.disk_hits = counters_.disk_hits.load();
  out.disk_misses = counters_.disk_misses.load();
  out.compiles = counters_.compiles.load();
  out.corrupt_healed = counters_.corrupt_healed.load();
  out.rejected = counters_.rejected.load();
  out.lock_waits = counters_.lock_waits.load();
  out.lock_timeouts = counters_.lock_timeouts.load();
  out.lock_failures = counters_.lock_failures.load();
  out.evictions = counters_.evictions.load();
  out.store_failures = counters_.store_failures.load();
  return out;
}

std::string DiskCache::entry_name(const CacheKey& key, const std::string& module, const Target& target) {
  return detail::entry_file_name(key, module, target.name());
}

std::optional<CompiledModule> DiskCache::lookup(const CacheKey& key, const std::string& module,
                                               const Target& target) {
  if (mode_ != DiskCacheMode::read_write) return std::nullopt;
  const std::string name = entry_name(key, module, target);
  EntryRead read = detail::read_entry_file(dir_fd_, name, key, config_.max_bytes, touch_interval_s);
  if (read.result == EntryRead::Result::ok && (read.view.module != module || read.view.target != target.name())) {
    read.result = EntryRead::Result::bad;
    read.reason = "holds module '" + std::string(read.view.module) + "' for '" + std::string(read.view.target) + "'";
  }
  switch (read.result) {
    case EntryRead::Result::absent:
      if (!read.reason.empty()) logger().debug("disk cache: {}: {}", name, read.reason);
      return std::nullopt;
    case EntryRead::Result::too_large:
      // Why not deleted: another process with a larger KILN_CACHE_MAX_BYTES wrote it and uses it;
      // if it does not fit this process's bound, the eviction pass removes it as an eviction.
      logger().debug("disk cache: {} skipped: {}", name, read.reason);
      return std::nullopt;
    case EntryRead::Result::bad:
      detail::remove_bad_entry(dir_fd_, name, read);
      counters_.corrupt_healed.fetch_add(1);
      logger().warn("disk cache: removed bad entry '{}' ({}); it will be compiled again", name, read.reason);
      return std::nullopt;
    case EntryRead::Result::ok:
      break;
  }
  return compiled_module_of(read.view, target);
}

bool DiskCache::holds(const CacheKey& key, const std::string& module, const Target& target) const {
  if (mode_ != DiskCacheMode::read_write) return false;
  struct stat info {};
  return ::fstatat(dir_fd_, entry_name(key, module, target).c_str(), &info, 0) == 0 && S_ISREG(info.st_mode);
}

std::optional<CompiledModule> DiskCache::load(const CacheKey& key, const std::string& module, const Target& target) {
  auto found = lookup(key, module, target);
  (found ? counters_.disk_hits : counters_.disk_misses).fetch_add(1);
  logger().debug("disk cache {} for {} on {}", found ? "hit" : "miss", module, target.name());
  return found;
}

void DiskCache::warn_store_failure(const std::string& what) {
  counters_.store_failures.fetch_add(1);
  if (!warned_store_.exchange(true))
    logger().warn("disk cache: cannot store in '{}': {}; continuing from memory", config_.dir.value_or(""), what);
  else
    logger().debug("disk cache: cannot store: {}", what);
}

bool DiskCache::publish(const CacheKey& key, const CompiledModule& module) {
  if (mode_ != DiskCacheMode::read_write) return false;
  try {
    // Why the build when no version was given: the process cache is made before NVRTC is loaded
    // (it may never be), and the build names NVRTC more exactly anyway.
    const std::string nvrtc = config_.nvrtc ? config_.nvrtc->str() : nvrtc_build().empty() ? "unknown" : nvrtc_build();
    const auto bytes = encode_entry(key, module, nvrtc,
                                    static_cast<std::int64_t>(std::time(nullptr)));
    if (bytes.size() > config_.max_bytes) {
      warn_store_failure("entry of " + std::to_string(bytes.size()) + " bytes is larger than the cache bound");
      return false;
    }
    const std::string name = entry_name(key, module.module, module.target);
    if (auto error = detail::publish_entry_file(dir_fd_, name, bytes); !error.empty()) {
      warn_store_failure(error);
      return false;
    }
    logger().debug("disk cache: stored {} ({} bytes)", name, bytes.size());
    return true;
  } catch (const std::exception& e) {
    warn_store_failure(e.what());
    return false;
  }
}

void DiskCache::store(const CacheKey& key, const CompiledModule& module) {
  if (publish(key, module)) enforce_bound();
}

void DiskCache::evict(const CacheKey& key, const std::string& module, const Target& target) {
  if (mode_ != DiskCacheMode::read_write) return;
  const std::string name = entry_name(key, module, target);
  if (::unlinkat(dir_fd_, name.c_str(), 0) == 0) {
    counters_.rejected.fetch_add(1);
    logger().info("disk cache: removed '{}', which the driver refused", name);
  }
}

CacheResult DiskCache::load_or_compile(const CacheKey& key, const std::string& module, const Target& target,
                                       const std::function<CompiledModule()>& compile) {
  auto compile_here = [&](CacheOutcome outcome) {
    counters_.compiles.fetch_add(1);
    return CacheResult{compile(), outcome};
  };
  if (mode_ != DiskCacheMode::read_write) return compile_here(CacheOutcome::compiled);

  if (auto found = lookup(key, module, target)) {
    counters_.disk_hits.fetch_add(1);
    return {std::move(*found), CacheOutcome::hit};
  }
  const std::string lock_name = detail::lock_file_name(key, module, target.name());
  auto lock = detail::acquire_file_lock(dir_fd_, lock_name, config_.lock_timeout);
  if (lock.waited) counters_.lock_waits.fetch_add(1);
  // Why look again: the holder we waited for (or one that finished just before we locked) has
  // published the entry; this is what makes it one compile per key.
  if (auto found = lookup(key, module, target)) {
    counters_.disk_hits.fetch_add(1);
    return {std::move(*found), CacheOutcome::hit_after_wait};
  }
  counters_.disk_misses.fetch_add(1);
  auto outcome = CacheOutcome::compiled;
  if (lock.status != detail::LockStatus::acquired) {
    outcome = CacheOutcome::compiled_without_lock;
    const bool timed_out = lock.status == detail::LockStatus::timed_out;
    (timed_out ? counters_.lock_timeouts : counters_.lock_failures).fetch_add(1);
    const std::string why = timed_out ? "another process held " + lock_name + " for " +
                                            std::to_string(config_.lock_timeout.count()) + " ms"
                                      : "no working lock: " + lock.error;
    if (!warned_lock_.exchange(true))
      logger().warn("disk cache: compiling {} for {} without the lock ({})", module, target.name(), why);
    else
      logger().info("disk cache: compiling {} for {} without the lock ({})", module, target.name(), why);
  }
  CacheResult result = compile_here(outcome);
  const bool published = publish(key, result.module);
  lock.fd.close();  // Why before the eviction pass: waiters should not wait for our housekeeping
  if (published) enforce_bound();
  return result;
}

std::uint64_t DiskCache::enforce_bound() {
  if (mode_ != DiskCacheMode::read_write) return 0;
  std::string error;
  auto files = detail::scan_cache_folder(dir_fd_, error);
  if (!error.empty()) logger().debug("disk cache: eviction pass: {}", error);

  const std::time_t now = std::time(nullptr);
  std::vector<const detail::ScannedFile*> entries;
  entries.reserve(files.size());
  std::unordered_set<std::string_view> entry_stems;  // views into `files`
  std::uint64_t total = 0;
  for (const auto& file : files) {
    if (file.parsed.kind == CacheFileKind::entry && file.regular) {
      entries.push_back(&file);
      entry_stems.insert(stem_of(file.name, ".kiln"));
      total += file.size;
    } else if (file.parsed.kind == CacheFileKind::temp && file.mtime.tv_sec + stale_temp_s < now) {
      ::unlinkat(dir_fd_, file.name.c_str(), 0);
    }
  }
  std::uint64_t evicted = 0;
  if (total > config_.max_bytes) {
    std::sort(entries.begin(), entries.end(), [](const detail::ScannedFile* a, const detail::ScannedFile* b) {
      return older(a->mtime, b->mtime) || (!older(b->mtime, a->mtime) && a->name < b->name);
    });
    for (const auto* entry : entries) {
      if (total <= config_.max_bytes) break;
      // ENOENT: another process evicted it first; it is gone either way.
      if (::unlinkat(dir_fd_, entry->name.c_str(), 0) == 0) ++evicted;
      total -= entry->size;
      entry_stems.erase(stem_of(entry->name, ".kiln"));
    }
    counters_.evictions.fetch_add(evicted);
    logger().debug("disk cache: evicted {} entries, {} bytes left", evicted, total);
  }
  for (const auto& file : files)
    if (file.parsed.kind == CacheFileKind::lock && entry_stems.count(stem_of(file.name, ".lock")) == 0)
      detail::remove_idle_lock(dir_fd_, file.name);
  return evicted;
}

CacheStats DiskCache::stats() const {
  CacheStats stats;
  if (mode_ != DiskCacheMode::read_write) return stats;
  std::string error;
  for (const auto& file : detail::scan_cache_folder(dir_fd_, error)) {
    switch (file.parsed.kind) {
      case CacheFileKind::entry: {
        ++stats.entries;
        stats.bytes += file.size;
        auto& target = stats.per_target[file.parsed.target];
        ++target.entries;
        target.bytes += file.size;
        break;
      }
      case CacheFileKind::temp: ++stats.temp_files; break;
      case CacheFileKind::lock: ++stats.lock_files; break;
    }
  }
  return stats;
}

CacheVerifyReport DiskCache::verify() const {
  CacheVerifyReport report;
  if (mode_ != DiskCacheMode::read_write) return report;
  std::string error;
  for (const auto& file : detail::scan_cache_folder(dir_fd_, error)) {
    if (file.parsed.kind != CacheFileKind::entry) continue;
    auto read = detail::read_entry_file(dir_fd_, file.name, file.parsed.key, config_.max_bytes, 0);
    if (read.result == EntryRead::Result::absent && read.reason.empty()) continue;  // removed meanwhile
    if (read.result == EntryRead::Result::ok && (detail::file_name_part(read.view.module) != file.parsed.module ||
                                                 detail::file_name_part(read.view.target) != file.parsed.target)) {
      read.result = EntryRead::Result::bad;
      read.reason = "holds module '" + std::string(read.view.module) + "' for '" + std::string(read.view.target) +
                    "', not what its name says";
    }
    if (read.result == EntryRead::Result::ok)
      ++report.good;
    else if (read.result == EntryRead::Result::too_large)
      report.skipped.push_back({file.name, read.reason});
    else
      report.bad.push_back({file.name, read.reason});
  }
  return report;
}

std::uint64_t DiskCache::clear() {
  if (mode_ != DiskCacheMode::read_write) return 0;
  std::string error;
  std::uint64_t removed = 0;
  for (const auto& file : detail::scan_cache_folder(dir_fd_, error))
    if (::unlinkat(dir_fd_, file.name.c_str(), 0) == 0) ++removed;
  return removed;
}

}  // namespace kiln

#pragma once
/// @file
/// kiln's persistent disk cache: a folder of content-addressed entries (format in cache_entry.hpp),
/// shared by every process of the user on the node, possibly on a network filesystem.
///
/// Guarantees:
/// - Readers never see a partial entry: entries are written to a unique temporary file in the same
///   folder, fsynced, closed and renamed into place.
/// - Nothing is loaded unverified: every read checks owner, file type, magic, version, key, sizes
///   and checksum. A bad entry (truncated, changed, wrong key, empty, garbage, a symlink, not a
///   regular file, another owner) is deleted, counted, warned about once, and reported as a miss.
///   An entry larger than this process's `max_bytes` is not read and not judged: a miss, neither
///   deleted nor counted as bad (processes may run with different bounds); the eviction pass may
///   remove it as an eviction.
/// - One compile per key across processes: load_or_compile holds a per-key lock file while it
///   compiles; waiters then read the winner's entry.
/// - Failures never escape: a folder that is unsafe or read-only degrades to memory only with one
///   warning; a failed store (full disk, file size limit, folder gone) warns once and is counted.
///   Only the compile function's own exceptions propagate.
/// - The folder stays under `max_bytes`: after each store, least recently used entries go
///   (a hit refreshes the entry's mtime, so recency is shared by all processes).
///
/// Thread safety: every member may be called from many threads at once.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"
#include "jit/compiled_module.hpp"
#include "kiln/counters.hpp"
#include "kiln/target.hpp"

namespace kiln {

struct Config;

/// Where the cache lives and its limits.
struct DiskCacheConfig {
  /// The cache folder; nothing: no disk cache (`disabled_reason` says why).
  std::optional<std::string> dir;
  std::string disabled_reason;
  std::uint64_t max_bytes = std::uint64_t{1} << 30;  ///< bound on the entries' total size
  /// How long load_or_compile waits for another process's compile before compiling itself.
  std::chrono::milliseconds lock_timeout{30000};
  /// Written into entry headers for people ("13.0"); not part of any check (the key covers it).
  std::optional<Version> nvrtc;

  /// From the environment as it is now (current_config): `KILN_CACHE=0` disables; the folder is
  /// `KILN_CACHE_DIR` (a relative one is made absolute against the working directory now, or
  /// disables the cache if that is unknown), else
  /// `$XDG_CACHE_HOME/kiln` (if absolute), else `$HOME/.cache/kiln`, else the passwd home's;
  /// `KILN_CACHE_MAX_BYTES` (parse_size syntax, > 0) bounds the size. A bad value warns once and
  /// gives the default.
  static DiskCacheConfig from_env(std::optional<Version> nvrtc = std::nullopt);
  /// The same from a configuration's values (base/config.hpp), which holds the warnings.
  static DiskCacheConfig from_config(const Config& config, std::optional<Version> nvrtc = std::nullopt);
};

enum class DiskCacheMode {
  disabled,     ///< turned off by configuration
  memory_only,  ///< configured, but the folder is unusable (unsafe, read-only, not a folder, ...)
  read_write,   ///< in use
};
std::string_view to_string(DiskCacheMode mode);

struct DiskCacheStatus {
  DiskCacheMode mode = DiskCacheMode::disabled;
  std::string dir;     ///< the configured folder, possibly empty
  std::string reason;  ///< why not read_write; empty when read_write
};

/// What load_or_compile did.
enum class CacheOutcome {
  hit,                    ///< a verified entry was there
  hit_after_wait,         ///< another process published it while we were taking the lock
  compiled,               ///< compiled here (holding the lock, or no disk cache in use)
  compiled_without_lock,  ///< compiled after a lock timeout or lock failure
};
std::string_view to_string(CacheOutcome outcome);

struct CacheResult {
  CompiledModule module;
  CacheOutcome outcome = CacheOutcome::compiled;
};

struct CacheTargetStats {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
};

struct CacheStats {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;         ///< entries only
  std::uint64_t temp_files = 0;    ///< unfinished writes (a crashed or running writer)
  std::uint64_t lock_files = 0;
  std::map<std::string, CacheTargetStats> per_target;  ///< by the target part of the file name
};

struct BadEntry {
  std::string file;    ///< name inside the folder
  std::string reason;
};

struct CacheVerifyReport {
  std::uint64_t good = 0;
  std::vector<BadEntry> bad;
  /// Not read: larger than this process's `max_bytes`. Neither good nor bad: a process with a
  /// larger bound may have written it.
  std::vector<BadEntry> skipped;
};

/// The cache folder. Owns a descriptor of the folder, opened once: every file operation is
/// relative to it, so renaming or replacing the folder's path later cannot redirect kiln's writes.
class DiskCache {
 public:
  /// Opens (creating with mode 0700 if missing) and checks `config.dir`: the folder (after
  /// following a symlink, if it is one) must be a directory owned by this effective user, not
  /// writable by group or others, and writable by us (proved by creating and removing a file in
  /// it, not by mode bits, which root ignores). Otherwise memory_only, with one warning naming the
  /// folder and the reason.
  explicit DiskCache(DiskCacheConfig config);
  /// DiskCache(DiskCacheConfig::from_env(nvrtc)).
  static DiskCache from_env(std::optional<Version> nvrtc = std::nullopt);
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  DiskCacheStatus status() const;
  DiskCacheCounters counters() const;
  const DiskCacheConfig& config() const noexcept { return config_; }

  /// `<module>.<target>.<key hex>.kiln`: the entry's file name inside the folder (characters
  /// outside [A-Za-z0-9_+-] in module or target become '_').
  static std::string entry_name(const CacheKey& key, const std::string& module, const Target& target);

  /// The verified entry, or nothing (absent, bad, larger than `max_bytes`, or not read_write).
  /// Counts one hit or miss.
  std::optional<CompiledModule> load(const CacheKey& key, const std::string& module, const Target& target);

  /// Whether the entry file of `key` exists (read_write mode only), neither read nor verified:
  /// enough to tell which target this NVRTC build compiled before; load() verifies what it reads.
  bool holds(const CacheKey& key, const std::string& module, const Target& target) const;

  /// Publishes `module` under `key`, then runs an eviction pass. Never throws; a failure is
  /// counted and warned about once per DiskCache.
  void store(const CacheKey& key, const CompiledModule& module);

  /// Removes the entry, for a binary the driver refused to load; the caller recompiles once (and
  /// gives up if the fresh binary is refused too). Counted in `rejected`.
  void evict(const CacheKey& key, const std::string& module, const Target& target);

  /// The verified entry, else the result of `compile`, stored. Across processes, one compile per
  /// key: the per-key lock is held while checking again and compiling, so waiters find the
  /// winner's entry. After `lock_timeout` with a live holder, or when locking is impossible,
  /// compiles without the lock (a duplicate compile is harmless: publishing is atomic).
  /// Exceptions from `compile` propagate (nothing is stored; the lock is released).
  CacheResult load_or_compile(const CacheKey& key, const std::string& module, const Target& target,
                              const std::function<CompiledModule()>& compile);

  /// Eviction pass: removes least recently used entries until the total is at most `max_bytes`,
  /// temporary files older than 10 minutes, and idle lock files without an entry. Returns the
  /// number of entries evicted. Called by store(); public for tools and tests.
  std::uint64_t enforce_bound();

  /// Entries, bytes, per target. Empty unless read_write.
  CacheStats stats() const;
  /// Reads and verifies every entry against the key and names in its file name; reports, deletes
  /// nothing. Entries larger than `max_bytes` are reported as skipped, not read.
  CacheVerifyReport verify() const;
  /// Removes kiln's entries, temporary files and lock files (and nothing else in the folder).
  /// Returns the number of files removed. Safe while other processes run: a compile in flight may
  /// lose its lock file, which costs at most a duplicate compile.
  std::uint64_t clear();

 private:
  /// load() without counting a hit or miss (bad entries are still healed and counted).
  std::optional<CompiledModule> lookup(const CacheKey& key, const std::string& module, const Target& target);
  bool publish(const CacheKey& key, const CompiledModule& module);
  void warn_store_failure(const std::string& what);

  DiskCacheConfig config_;
  DiskCacheMode mode_ = DiskCacheMode::disabled;
  std::string reason_;
  int dir_fd_ = -1;

  struct AtomicCounters {
    std::atomic<std::uint64_t> disk_hits{0}, disk_misses{0}, compiles{0}, corrupt_healed{0}, rejected{0},
        lock_waits{0}, lock_timeouts{0}, lock_failures{0}, evictions{0}, store_failures{0};
  };
  mutable AtomicCounters counters_;
  std::atomic<bool> warned_store_{false};
  std::atomic<bool> warned_lock_{false};
};

}  // namespace kiln

#pragma once
/// @file
/// What kiln's caches did in this process: plain counters, monotonic, never reset.

#include <cstdint>

namespace kiln {

/// One device's memory cache, monotonic since construction (clear() does not reset them).
struct ModuleCacheCounters {
  std::uint64_t memory_hits = 0;   ///< lookups answered from memory at once (loaded or failed module)
  std::uint64_t lock_waits = 0;    ///< lookups that waited for another thread loading the same module
  std::uint64_t disk_hits = 0;     ///< binaries the provider read from disk
  std::uint64_t compiles = 0;      ///< binaries the provider compiled (a failed compile is a failure)
  double compile_ms = 0;           ///< total `compile_ms` of those compiles
  std::uint64_t load_refused = 0;  ///< binaries the driver refused as bad images
  std::uint64_t failures = 0;      ///< modules that ended failed (each logged once)
};

/// The disk cache's event counts, monotonic since construction. Exact: each load() is one hit or
/// one miss; each load_or_compile() on a read_write cache is one hit (possibly after waiting) or one
/// miss.
struct DiskCacheCounters {
  std::uint64_t disk_hits = 0;
  std::uint64_t disk_misses = 0;
  std::uint64_t compiles = 0;        ///< compile functions run by load_or_compile (any mode)
  std::uint64_t corrupt_healed = 0;  ///< bad entries found and deleted
  std::uint64_t rejected = 0;        ///< entries removed by evict() (the driver refused them)
  std::uint64_t lock_waits = 0;      ///< lock held by someone else at first
  std::uint64_t lock_timeouts = 0;   ///< gave up waiting and compiled without the lock
  std::uint64_t lock_failures = 0;   ///< no working lock (e.g. NFS without flock): compiled without it
  std::uint64_t evictions = 0;       ///< entries removed to stay under max_bytes
  std::uint64_t store_failures = 0;  ///< entries that could not be written
};

/// What one Service reports: its device's memory-cache counters and the process's disk-cache counters.
struct ServiceCounters {
  ModuleCacheCounters memory;
  DiskCacheCounters disk;
};

}  // namespace kiln

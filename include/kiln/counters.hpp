#pragma once
/// @file
/// What kiln's caches did in this process: plain counters, monotonic, never reset.

#include <cstdint>
#include <type_traits>

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

/// The remote (Redis) tier's event counts in this process, monotonic. Zero when KILN_REMOTE_CACHE
/// is unset. Each lookup of a module through the tier is one remote hit or one remote miss.
struct RemoteCacheCounters {
  std::uint64_t remote_hits = 0;         ///< verified entries read from Redis (then kept on local disk)
  std::uint64_t remote_misses = 0;       ///< lookups that ended compiling here (absent, bad, or Redis unusable)
  std::uint64_t compiles = 0;            ///< compile functions run behind the tier (with or without a lease)
  std::uint64_t publishes = 0;           ///< entries this process wrote to Redis (first writer)
  std::uint64_t publish_lost = 0;        ///< publishes that found the key already written (a race lost, harmless)
  std::uint64_t lease_waits = 0;         ///< lookups that found another node's lease and waited
  std::uint64_t lease_takeovers = 0;     ///< leases taken after waiting: the holder died or failed
  std::uint64_t wait_timeouts = 0;       ///< waits that ran out (KILN_REMOTE_CACHE_WAIT_MS): compiled anyway
  std::uint64_t signature_mismatch = 0;  ///< sound values whose signature does not verify under this node's key
                                         ///< (another key, or unsigned): never loaded, left in Redis
  std::uint64_t corrupt = 0;             ///< values malformed on their own (envelope, checksum, key or name;
                                         ///< deleted) or of another entry format version (left)
  std::uint64_t wrong_type = 0;          ///< kiln keys holding another Redis type (skipped, left alone)
  std::uint64_t timeouts = 0;            ///< commands or connects that ran past their timeout
  std::uint64_t errors = 0;              ///< other failures: refused, lost connection, auth, garbage, error replies
  std::uint64_t oom = 0;                 ///< writes the server refused with OOM (maxmemory reached)
  std::uint64_t skipped = 0;             ///< commands not sent because the tier was resting after a failure
};

/// What one Service reports: its device's memory-cache counters and the process's disk-cache and
/// remote-tier counters.
struct ServiceCounters {
  ModuleCacheCounters memory;
  DiskCacheCounters disk;
  RemoteCacheCounters remote;
};

namespace detail {

template <class Counters, class Visit>
void visit_memory(Counters& c, Visit& visit) {
  visit("memory_hits", c.memory_hits);
  visit("lock_waits", c.lock_waits);
  visit("disk_hits", c.disk_hits);
  visit("compiles", c.compiles);
  visit("compile_ms", c.compile_ms);
  visit("load_refused", c.load_refused);
  visit("failures", c.failures);
}

template <class Counters, class Visit>
void visit_disk(Counters& c, Visit& visit) {
  visit("disk_hits", c.disk_hits);
  visit("disk_misses", c.disk_misses);
  visit("compiles", c.compiles);
  visit("corrupt_healed", c.corrupt_healed);
  visit("rejected", c.rejected);
  visit("lock_waits", c.lock_waits);
  visit("lock_timeouts", c.lock_timeouts);
  visit("lock_failures", c.lock_failures);
  visit("evictions", c.evictions);
  visit("store_failures", c.store_failures);
}

template <class Counters, class Visit>
void visit_remote(Counters& c, Visit& visit) {
  visit("hits", c.remote_hits);
  visit("misses", c.remote_misses);
  visit("compiles", c.compiles);
  visit("publishes", c.publishes);
  visit("publish_lost", c.publish_lost);
  visit("lease_waits", c.lease_waits);
  visit("lease_takeovers", c.lease_takeovers);
  visit("wait_timeouts", c.wait_timeouts);
  visit("signature_mismatch", c.signature_mismatch);
  visit("corrupt", c.corrupt);
  visit("wrong_type", c.wrong_type);
  visit("timeouts", c.timeouts);
  visit("errors", c.errors);
  visit("oom", c.oom);
  visit("skipped", c.skipped);
}

// Why: a counter added to a struct but not to its list above would be missing from every report.
static_assert(sizeof(ModuleCacheCounters) == 6 * sizeof(std::uint64_t) + sizeof(double),
              "list a new ModuleCacheCounters field in visit_memory");
static_assert(sizeof(DiskCacheCounters) == 10 * sizeof(std::uint64_t), "list a new DiskCacheCounters field in visit_disk");
static_assert(sizeof(RemoteCacheCounters) == 15 * sizeof(std::uint64_t),
              "list a new RemoteCacheCounters field in visit_remote");

}  // namespace detail

/// Calls `visit(name, counter)` for every counter of `counters` (a ModuleCacheCounters,
/// DiskCacheCounters or RemoteCacheCounters), in declaration order, with the names kiln's reports
/// use (`kiln info --json`'s `remote` object, `kiln.cache_stats()`): one list for every surface that
/// reports them, and for an embedder's metrics exporter. Through a non-const struct, `visit` gets
/// references it may write.
template <class Counters, class Visit>
void for_each_counter(Counters& counters, Visit&& visit) {
  using Plain = std::remove_const_t<Counters>;
  if constexpr (std::is_same_v<Plain, ModuleCacheCounters>)
    detail::visit_memory(counters, visit);
  else if constexpr (std::is_same_v<Plain, DiskCacheCounters>)
    detail::visit_disk(counters, visit);
  else {
    static_assert(std::is_same_v<Plain, RemoteCacheCounters>, "not a kiln counters struct");
    detail::visit_remote(counters, visit);
  }
}

}  // namespace kiln

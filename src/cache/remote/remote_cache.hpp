#pragma once
/// @file
/// The fleet tier: a Redis server shared by every node, between the local disk cache and the
/// compiler (memory -> disk -> Redis -> compile).
///
/// Guarantees:
/// - Nothing unverified is loaded: a value must be kiln's envelope (remote_value.hpp), signed with
///   the fleet's secret when one is configured, and hold an entry that passes the disk format's
///   checks (magic, version, key, layout, XXH3-128 checksum) for the module and target asked for.
///   A bad value is counted, warned about once per cause, deleted from Redis (only if it is still
///   the same bytes) and the module compiled here.
/// - One compile per key across the fleet: before compiling, a node takes a lease on the key
///   (`SET NX PX`, KILN_REMOTE_CACHE_LEASE_MS); others poll for the entry for at most
///   KILN_REMOTE_CACHE_WAIT_MS, take the lease over if its holder vanished, or compile themselves
///   when the wait runs out. Entries are published with `SET NX`: the first writer wins, a loser
///   keeps its own (identical) result.
/// - Never a stall on a sick server: every connect and command is bounded by its timeout; after a
///   failure the tier rests for KILN_REMOTE_CACHE_RETRY_MS (commands are skipped and counted) and
///   the node carries on with its local tiers. Each cause is warned about once per process.
///
/// Thread safety: every member may be called from many threads at once (a pool of connections).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"
#include "cache/remote/redis_connection.hpp"
#include "cache/remote/remote_config.hpp"
#include "jit/compiled_module.hpp"
#include "kiln/counters.hpp"
#include "kiln/target.hpp"

namespace kiln {

struct RemoteCacheStatus {
  bool enabled = false;
  std::string endpoint;  ///< the URL without its password
  bool signed_entries = false;
  std::string reason;    ///< why not enabled (empty when KILN_REMOTE_CACHE is unset)
};

struct RemoteStats {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;   ///< the values' lengths (entry plus 41-byte envelope)
  std::uint64_t leases = 0;  ///< compiles in flight somewhere in the fleet
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> per_target;  ///< target -> entries, bytes
};

class RemoteCache {
 public:
  /// `nvrtc` ("13.0") is written into published entries for people, as the disk cache does.
  RemoteCache(RemoteCacheConfig config, std::string nvrtc);
  ~RemoteCache();
  RemoteCache(const RemoteCache&) = delete;
  RemoteCache& operator=(const RemoteCache&) = delete;

  bool enabled() const noexcept { return config_.endpoint.has_value(); }
  RemoteCacheStatus status() const;
  RemoteCacheCounters counters() const;
  const RemoteCacheConfig& config() const noexcept { return config_; }

  /// `kiln:entry:<disk entry name>` and `kiln:lease:<disk entry name>`.
  static std::string entry_key(const CacheKey& key, const std::string& module, const Target& target);
  static std::string lease_key(const CacheKey& key, const std::string& module, const Target& target);

  struct Fetched {
    CompiledModule module;
    bool from_remote = false;  ///< a verified Redis entry; otherwise compiled here
  };
  /// The verified remote entry, else `compile()` under the fleet lease, published. Exceptions
  /// from `compile` propagate (the lease is released so a waiter can try). Disabled: compile().
  Fetched fetch_or_compile(const CacheKey& key, const std::string& module, const Target& target,
                           const std::function<CompiledModule()>& compile);

  /// The verified remote entry or nothing (absent, bad, Redis unusable); one hit or miss. A key
  /// this process distrusts is not asked for (nothing, uncounted).
  std::optional<CompiledModule> fetch(const CacheKey& key, const std::string& module, const Target& target);

  enum class PushResult { stored, present, failed };
  /// Publishes an encoded, already verified entry with `SET NX` (kiln cache push); `module` and
  /// `target` are the names the entry holds.
  PushResult push(const CacheKey& key, std::string_view module, std::string_view target,
                  const std::vector<std::uint8_t>& entry);

  /// A binary from Redis that the driver refused: this process stops asking Redis for `key`, so
  /// the retry compiles here (Redis is left alone: another node's driver may take it).
  void distrust(const CacheKey& key);

  /// Counts kiln's entries and leases on the server (SCAN), each key once; an entry deleted before
  /// its STRLEN is not counted. Nothing, with `error` set, on failure.
  std::optional<RemoteStats> stats(std::string& error);

 private:
  enum class Lookup { hit, miss, unusable };
  /// One command on a pooled connection; null on failure (counted, warned once per cause, and
  /// the tier rests) or while resting (counted as skipped).
  detail::ReplyPtr run(const std::vector<std::string_view>& args);
  Lookup lookup(const std::string& redis_key, const CacheKey& key, const std::string& module, const Target& target,
                std::optional<CompiledModule>& found);
  void refuse(const std::string& redis_key, const std::string& value, bool signature, const std::string& why);
  void publish(const std::string& redis_key, const CacheKey& key, const CompiledModule& module);
  void release(const std::string& lease, const std::string& token);
  void note_failure(const detail::RedisFailure& failure);
  void warn_once(const std::string& cause, const std::string& message);
  bool distrusts(const CacheKey& key);
  bool resting() const;

  RemoteCacheConfig config_;
  std::string nvrtc_;
  std::string token_prefix_;  ///< host and pid: who holds a lease, for people reading Redis

  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<detail::RedisConnection>> pool_;
  std::atomic<std::int64_t> rest_until_ns_{0};

  std::mutex warned_mutex_;
  std::set<std::string> warned_;
  std::mutex distrusted_mutex_;
  std::set<std::string> distrusted_;
  std::atomic<std::uint64_t> lease_serial_{0};

  struct AtomicCounters {
    std::atomic<std::uint64_t> remote_hits{0}, remote_misses{0}, compiles{0}, publishes{0}, publish_lost{0},
        lease_waits{0}, lease_takeovers{0}, wait_timeouts{0}, signature_failures{0}, corrupt{0}, timeouts{0},
        errors{0}, skipped{0};
  };
  mutable AtomicCounters counters_;
};

/// The process's remote tier, configured from the environment on first use (disabled unless
/// KILN_REMOTE_CACHE is set; a bad setting warns once and leaves it disabled). Thread-safe.
std::shared_ptr<RemoteCache> process_remote_cache();

}  // namespace kiln

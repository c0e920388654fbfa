#pragma once
/// @file
/// The fleet tier: a Redis server shared by every node, between the local disk cache and the
/// compiler (memory -> disk -> Redis -> compile).
///
/// Guarantees:
/// - Nothing unverified is loaded: a value must be kiln's envelope (remote_value.hpp), signed with
///   the fleet's secret when one is configured, and hold an entry that passes the disk format's
///   checks (magic, version, key, layout, XXH3-128 checksum) for the module and target asked for.
/// - A node never deletes what it cannot prove bad: a value whose signature does not verify under
///   this node's key (another key, or unsigned) but whose entry is sound is skipped, counted
///   (`signature_mismatch`) and left in Redis; a node that sees mostly such values warns once that
///   its key differs from the fleet's. Only a value malformed on its own (not a kiln envelope,
///   truncated, wrong checksum, another key's or module's entry) is deleted (`corrupt`), by a
///   compare-and-delete script that reads it again on the server and deletes it only if it still
///   holds the same bytes. An entry of another format version is refused and left.
/// - A kiln key holding another Redis type (a stray `RPUSH`) is skipped, counted (`wrong_type`),
///   named once in a warning and left alone; it never fails a command.
/// - One compile per key across the fleet: before compiling, a node takes a lease on the key
///   (`SET NX PX`, KILN_REMOTE_CACHE_LEASE_MS); others poll for the entry for at most
///   KILN_REMOTE_CACHE_WAIT_MS, take the lease over if its holder vanished, or compile themselves
///   when the wait runs out. Entries are published with `SET NX`: the first writer wins, a loser
///   keeps its own (identical) result.
/// - Never a stall on a sick server: every connect and command is bounded by its timeout; after a
///   failure to reach the server (down, slow, refused, broken connection, garbled reply, AUTH
///   refused) the tier rests for KILN_REMOTE_CACHE_RETRY_MS (commands are skipped and counted) and
///   the node carries on with its local tiers. An error reply from a server that answers (OOM
///   under maxmemory, READONLY, ...) does not rest the tier: it is counted (`oom` or `errors`) and
///   the next command is sent. Each cause is warned about once per process, naming the server.
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
#include <string_view>
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
  bool requested = false;  ///< KILN_REMOTE_CACHE is set (so !enabled is a configuration error)
  std::string endpoint;  ///< the URL without its password
  bool signed_entries = false;
  std::string reason;    ///< why not enabled (empty when KILN_REMOTE_CACHE is unset)
};

struct RemoteStats {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;   ///< the values' lengths (entry plus 41-byte envelope)
  std::uint64_t leases = 0;  ///< compiles in flight somewhere in the fleet
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> per_target;  ///< target -> entries, bytes
  std::vector<std::string> wrong_type;  ///< kiln:entry: keys holding another Redis type (skipped)
};

/// What one fetch() found, for `kiln cache pull`'s report.
enum class FetchOutcome {
  hit,          ///< a verified entry
  absent,       ///< no value under the key
  refused,      ///< a value that failed verification (`detail` says why and whether it was deleted)
  wrong_type,   ///< the key holds another Redis type
  unavailable,  ///< Redis could not be asked (`detail` names the server and the cause)
};
struct FetchReport {
  FetchOutcome outcome = FetchOutcome::absent;
  std::string detail;
};

class RemoteCache {
 public:
  /// `nvrtc` ("13.0") is written into published entries for people, as the disk cache does.
  RemoteCache(RemoteCacheConfig config, std::string nvrtc);
  ~RemoteCache();
  RemoteCache(const RemoteCache&) = delete;
  RemoteCache& operator=(const RemoteCache&) = delete;

  bool enabled() const noexcept { return config_.endpoint.has_value(); }
  /// KILN_REMOTE_CACHE is set but a setting turned the tier off (status().reason says which):
  /// `kiln info` and `kiln warm` exit 1 then.
  bool requested_but_off() const noexcept { return config_.requested_but_off(); }
  RemoteCacheStatus status() const;
  RemoteCacheCounters counters() const;
  const RemoteCacheConfig& config() const noexcept { return config_; }

  /// `kiln:entry:<disk entry name>` and `kiln:lease:<disk entry name>`.
  static std::string entry_key(const CacheKey& key, const std::string& module, const Target& target);
  static std::string lease_key(const CacheKey& key, const std::string& module, const Target& target);
  /// entry_key by the names an entry holds (`kiln cache push`).
  static std::string entry_key_named(const CacheKey& key, std::string_view module, std::string_view target);

  struct Fetched {
    CompiledModule module;
    bool from_remote = false;  ///< a verified Redis entry; otherwise compiled here
  };
  /// The verified remote entry, else `compile()` under the fleet lease, published. Exceptions
  /// from `compile` propagate (the lease is released so a waiter can try). Disabled: compile().
  Fetched fetch_or_compile(const CacheKey& key, const std::string& module, const Target& target,
                           const std::function<CompiledModule()>& compile);

  /// The verified remote entry or nothing (absent, bad, Redis unusable); one hit or miss. A key
  /// this process distrusts is not asked for (nothing, uncounted). `report`, when given, says
  /// what was found.
  std::optional<CompiledModule> fetch(const CacheKey& key, const std::string& module, const Target& target,
                                      FetchReport* report = nullptr);

  enum class PushResult { stored, present, failed, out_of_memory, wrong_type };
  /// Publishes an encoded, already verified entry with `SET NX` (kiln cache push); `module` and
  /// `target` are the names the entry holds. `present` only when the key holds a string (a value
  /// of kiln's); a key of another type is `wrong_type`; an OOM reply is `out_of_memory`.
  PushResult push(const CacheKey& key, std::string_view module, std::string_view target,
                  const std::vector<std::uint8_t>& entry);

  /// A binary from Redis that the driver refused: this process stops asking Redis for `key`, so
  /// the retry compiles here (Redis is left alone: another node's driver may take it).
  void distrust(const CacheKey& key);

  /// Counts kiln's entries and leases on the server (SCAN), each key once; an entry deleted before
  /// its STRLEN is not counted, one of another type is listed in `wrong_type`. Nothing, with
  /// `error` set (naming the server and the cause), on failure.
  std::optional<RemoteStats> stats(std::string& error);

  /// The latest Redis failure's message (naming the server and the cause), for summaries; empty
  /// when none.
  std::string last_failure() const;

 private:
  enum class Lookup {
    hit,
    absent,       ///< nothing there: a compile here may publish
    deleted,      ///< a bad value, deleted: a compile here may publish
    occupied,     ///< a value this node cannot use but must leave (mismatch, wrong type): no publish
    unusable,     ///< Redis failed or rests
  };
  struct Looked {
    Lookup lookup = Lookup::absent;
    FetchOutcome outcome = FetchOutcome::absent;
    std::string detail;
  };
  /// One command on a pooled connection; null on failure or while resting (counted as skipped).
  /// A failure is counted and warned once per cause (the tier rests unless the server answered
  /// with an error), except WRONGTYPE, which is the caller's to count and name. `failure`, when
  /// given, receives the cause.
  detail::ReplyPtr run(const std::vector<std::string_view>& args, detail::RedisFailure* failure = nullptr);
  /// `then` ends the warnings about a bad value: what the node does next ("; compiling here").
  Looked lookup(const std::string& redis_key, const CacheKey& key, const std::string& module, const Target& target,
                std::optional<CompiledModule>& found, const std::string& then);
  std::string delete_if_unchanged(const std::string& redis_key, const std::string& value);
  void note_wrong_type(const std::string& redis_key, const std::string& then);
  void note_mismatch(const std::string& redis_key, std::string_view why, bool unsigned_value, const std::string& then);
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

  mutable std::mutex warned_mutex_;
  std::set<std::string> warned_;
  std::string last_failure_;  ///< guarded by warned_mutex_
  std::mutex distrusted_mutex_;
  std::set<std::string> distrusted_;
  std::atomic<std::uint64_t> lease_serial_{0};

  struct AtomicCounters {
    std::atomic<std::uint64_t> remote_hits{0}, remote_misses{0}, compiles{0}, publishes{0}, publish_lost{0},
        lease_waits{0}, lease_takeovers{0}, wait_timeouts{0}, signature_mismatch{0}, corrupt{0}, wrong_type{0},
        timeouts{0}, errors{0}, oom{0}, skipped{0};
  };
  mutable AtomicCounters counters_;
  /// Values whose signature verified under this node's key; with signature_mismatch, tells a node
  /// whose key differs from the fleet's (most values mismatch) from one that met a stray value.
  std::atomic<std::uint64_t> verified_{0};
  std::atomic<std::uint64_t> unsigned_seen_{0};  ///< of the mismatches, values with no signature at all
};

/// A remote tier configured from `config` (disabled unless KILN_REMOTE_CACHE is set; a bad setting
/// warns and leaves it disabled).
std::shared_ptr<RemoteCache> remote_cache_for(const Config& config);

/// remote_cache_for the environment on first use, kept for the process. Thread-safe.
std::shared_ptr<RemoteCache> process_remote_cache();

}  // namespace kiln

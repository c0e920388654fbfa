#include "cache/remote/remote_cache.hpp"

#include <unistd.h>

#include <ctime>
#include <random>
#include <set>
#include <thread>

#include <hiredis/hiredis.h>

#include "base/config.hpp"
#include "base/log.hpp"
#include "cache/disk/cache_entry.hpp"
#include "cache/disk/cache_names.hpp"
#include "cache/fleet_signing.hpp"
#include "cache/remote/remote_value.hpp"
#include "jit/nvrtc.hpp"

namespace kiln {

namespace {

using detail::RedisFailure;
using detail::RedisFault;
using Clock = std::chrono::steady_clock;

constexpr std::string_view entry_prefix = "kiln:entry:";
constexpr std::string_view lease_prefix = "kiln:lease:";
constexpr std::size_t pool_limit = 16;
constexpr std::chrono::milliseconds poll_interval{20};

// Why a script: "delete only if it still holds what we saw" must be one step on the server, or a
// good value published between our GET and DEL would be lost (and a lease taken over by another
// node released by us).
constexpr std::string_view delete_if_same =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string_view reply_text(const redisReply& reply) { return {reply.str, reply.len}; }

}  // namespace

RemoteCache::RemoteCache(RemoteCacheConfig config, std::string nvrtc)
    : config_(std::move(config)), nvrtc_(std::move(nvrtc)) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  // Why a random part: containers often share host names and pids; a lease token must be unique
  // in the fleet, or one node's compare-and-delete could release another's lease.
  std::random_device random;
  token_prefix_ = std::string(host) + ":" + std::to_string(::getpid()) + ":" + std::to_string(random()) + ":";
  if (enabled())
    logger().debug("remote cache at {} ({})", config_.endpoint->display(),
                   config_.secret.empty() ? "unsigned entries" : "signed entries");
  else if (!config_.disabled_reason.empty() && warned_about(config_.disabled_reason))
    // Why: one cause (a key file that cannot be read) also stops the bundles, which said it first.
    logger().debug("remote cache not used: {}", config_.disabled_reason);
  else if (!config_.disabled_reason.empty())
    logger().warn("remote cache not used: {}", config_.disabled_reason);
}

RemoteCache::~RemoteCache() = default;

RemoteCacheStatus RemoteCache::status() const {
  RemoteCacheStatus status;
  status.enabled = enabled();
  status.requested = config_.requested;
  if (enabled()) status.endpoint = config_.endpoint->display();
  status.signed_entries = !config_.secret.empty();
  status.reason = config_.disabled_reason;
  return status;
}

RemoteCacheCounters RemoteCache::counters() const {
  RemoteCacheCounters out;
  out.remote_hits = counters_.remote_hits.load();
  out.remote_misses = counters_.remote_misses.load();
  out.compiles = counters_.compiles.load();
  out.publishes = counters_.publishes.load();
  out.publish_lost = counters_.publish_lost.load();
  out.lease_waits = counters_.lease_waits.load();
  out.lease_takeovers = counters_.lease_takeovers.load();
  out.wait_timeouts = counters_.wait_timeouts.load();
  out.signature_mismatch = counters_.signature_mismatch.load();
  out.corrupt = counters_.corrupt.load();
  out.wrong_type = counters_.wrong_type.load();
  out.timeouts = counters_.timeouts.load();
  out.errors = counters_.errors.load();
  out.oom = counters_.oom.load();
  out.skipped = counters_.skipped.load();
  return out;
}

std::string RemoteCache::entry_key(const CacheKey& key, const std::string& module, const Target& target) {
  return std::string(entry_prefix) + detail::entry_file_name(key, module, target.name());
}

std::string RemoteCache::entry_key_named(const CacheKey& key, std::string_view module, std::string_view target) {
  return std::string(entry_prefix) + detail::entry_file_name(key, module, target);
}

std::string RemoteCache::lease_key(const CacheKey& key, const std::string& module, const Target& target) {
  return std::string(lease_prefix) + detail::entry_file_name(key, module, target.name());
}

void RemoteCache::warn_once(const std::string& cause, const std::string& message) {
  bool first = false;
  {
    const std::lock_guard<std::mutex> lock(warned_mutex_);
    first = warned_.insert(cause).second;
  }
  if (first)
    logger().warn("remote cache: {}", message);
  else
    logger().debug("remote cache: {}", message);
}

std::string RemoteCache::last_failure() const {
  const std::lock_guard<std::mutex> lock(warned_mutex_);
  return last_failure_;
}

bool RemoteCache::resting() const { return now_ns() < rest_until_ns_.load(); }

void RemoteCache::note_failure(const RedisFailure& failure) {
  switch (failure.fault) {
    case RedisFault::timeout: counters_.timeouts.fetch_add(1); break;
    case RedisFault::oom: counters_.oom.fetch_add(1); break;
    default: counters_.errors.fetch_add(1); break;
  }
  // Why an error reply does not rest the tier: the server is up and answering (OOM on a write
  // under maxmemory, READONLY on a replica); reads and other commands may well succeed.
  const bool answered = failure.fault == RedisFault::server_error || failure.fault == RedisFault::oom;
  if (!answered) {
    rest_until_ns_.store(now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(config_.retry).count());
    const std::lock_guard<std::mutex> lock(pool_mutex_);
    pool_.clear();
  }
  const std::string cause(to_string(failure.fault));
  {
    const std::lock_guard<std::mutex> lock(warned_mutex_);
    last_failure_ = cause + ": " + failure.message;
  }
  const std::string then =
      failure.fault == RedisFault::oom ? "; entries are not published while Redis is full, reads go on"
      : answered                       ? "; the tier stays on"
                                       : "; using the local tiers (next try in " + std::to_string(config_.retry.count()) +
                                             " ms)";
  warn_once(cause, cause + ": " + failure.message + then);
}

detail::ReplyPtr RemoteCache::run(const std::vector<std::string_view>& args, RedisFailure* failure_out) {
  RedisFailure failure;
  if (!enabled()) {
    if (failure_out) *failure_out = {RedisFault::none, "the remote tier is off"};
    return nullptr;
  }
  if (resting()) {
    counters_.skipped.fetch_add(1);
    if (failure_out)
      *failure_out = {RedisFault::none, "not sent: the tier rests after " + last_failure() + " (next try within " +
                                            std::to_string(config_.retry.count()) + " ms)"};
    return nullptr;
  }
  std::unique_ptr<detail::RedisConnection> connection;
  {
    const std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      connection = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  if (!connection) connection = detail::RedisConnection::open(config_, failure);
  if (!connection) {
    note_failure(failure);
    if (failure_out) *failure_out = failure;
    return nullptr;
  }
  auto reply = connection->command(args, failure);
  if (!reply) {
    // Why not here: a stray key is the caller's to count and name; it says nothing of the server.
    if (failure.fault != RedisFault::wrong_type) note_failure(failure);
    if (failure_out) *failure_out = failure;
  }
  if (!connection->broken()) {
    const std::lock_guard<std::mutex> lock(pool_mutex_);
    if (pool_.size() < pool_limit) pool_.push_back(std::move(connection));
  }
  return reply;
}

std::string RemoteCache::delete_if_unchanged(const std::string& redis_key, const std::string& value) {
  RedisFailure failure;
  const auto reply = run({"EVAL", delete_if_same, "1", redis_key, value}, &failure);
  if (!reply) return "not deleted: " + failure.message;
  if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) return "deleted from Redis";
  return "left in Redis (it changed since it was read)";
}

void RemoteCache::note_wrong_type(const std::string& redis_key, const std::string& then) {
  counters_.wrong_type.fetch_add(1);
  warn_once("wrong type", "skipped '" + redis_key + "': it holds another Redis type than kiln's string values; left "
                          "alone" + then);
}

void RemoteCache::note_mismatch(const std::string& redis_key, std::string_view why, bool unsigned_value,
                                const std::string& then) {
  const std::uint64_t mismatches = counters_.signature_mismatch.fetch_add(1) + 1;
  const std::uint64_t unsigned_values = (unsigned_value ? unsigned_seen_.fetch_add(1) + 1 : unsigned_seen_.load());
  warn_once("signature", "skipped '" + redis_key + "': " + std::string(why) + "; left in Redis" + then);
  // Why a second warning: one mismatch may be a stray value, but a node whose key differs from
  // the fleet's misses on almost every lookup, which its operator must hear about once.
  const std::uint64_t verified = verified_.load();
  if (mismatches >= 2 && mismatches > verified)
    warn_once("fleet key",
              std::to_string(mismatches) + " of the " + std::to_string(mismatches + verified) +
                  " sound values read from Redis do not verify under this node's key (" + config_.key_file + ", " +
                  fleet_key_variable + "): its key differs from the fleet's" +
                  (unsigned_values * 2 > mismatches ? " (most are unsigned: the fleet has no key file)" : "") +
                  "; this node neither loads nor deletes them");
}

RemoteCache::Looked RemoteCache::lookup(const std::string& redis_key, const CacheKey& key, const std::string& module,
                                        const Target& target, std::optional<CompiledModule>& found,
                                        const std::string& then) {
  RedisFailure failure;
  const auto reply = run({"GET", redis_key}, &failure);
  if (!reply) {
    if (failure.fault == RedisFault::wrong_type) {
      note_wrong_type(redis_key, then);
      return {Lookup::occupied, FetchOutcome::wrong_type, "'" + redis_key + "' holds another Redis type"};
    }
    return {Lookup::unusable, FetchOutcome::unavailable,
            failure.fault == RedisFault::none ? failure.message
                                              : std::string(to_string(failure.fault)) + ": " + failure.message};
  }
  if (reply->type == REDIS_REPLY_NIL) return {Lookup::absent, FetchOutcome::absent, ""};
  if (reply->type != REDIS_REPLY_STRING) {
    note_failure({RedisFault::protocol, "GET at " + config_.endpoint->display() + " returned reply type " +
                                            std::to_string(reply->type)});
    return {Lookup::unusable, FetchOutcome::unavailable, last_failure()};
  }
  const std::string value(reply_text(*reply));
  const RemoteValue opened = unwrap_remote_value(redis_key, value, config_.secret);
  // What may be deleted is decided by the value alone, never by this node's key: a node with
  // another key must not wipe the fleet's entries (docs/caching.md, the fleet tier).
  auto corrupt = [&](const std::string& why) {
    counters_.corrupt.fetch_add(1);
    const std::string done = delete_if_unchanged(redis_key, value);
    warn_once("corrupt", "refused '" + redis_key + "': " + why + "; " + done + then);
    return Looked{done == "deleted from Redis" ? Lookup::deleted : Lookup::occupied, FetchOutcome::refused,
                  why + "; " + done};
  };
  if (opened.fault == RemoteValueFault::bad_envelope) return corrupt(std::string(to_string(opened.fault)));
  const bool signature_ok = opened.fault == RemoteValueFault::none;
  const std::string_view entry =
      signature_ok ? opened.entry : std::string_view(value).substr(remote_value_header_bytes);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(entry.data());
  const EntryDecode decoded = decode_entry(bytes, entry.size(), key);
  if (decoded.fault == EntryFault::bad_version) {
    // Why left: another kiln may read it; it is not provably bad.
    counters_.corrupt.fetch_add(1);
    const std::string why = std::string(to_string(decoded.fault)) + ": " + decoded.detail;
    warn_once("version", "skipped '" + redis_key + "': " + why + "; left in Redis" + then);
    return {Lookup::occupied, FetchOutcome::refused, why + "; left in Redis"};
  }
  if (!decoded.ok()) return corrupt(std::string(to_string(decoded.fault)) + ": " + decoded.detail);
  if (decoded.entry.module != module || decoded.entry.target != target.name())
    return corrupt("holds module '" + std::string(decoded.entry.module) + "' for '" +
                   std::string(decoded.entry.target) + "'");
  if (!signature_ok) {
    note_mismatch(redis_key, to_string(opened.fault), opened.fault == RemoteValueFault::missing_signature, then);
    return {Lookup::occupied, FetchOutcome::refused, std::string(to_string(opened.fault)) + "; left in Redis"};
  }
  if (!config_.secret.empty()) verified_.fetch_add(1);
  found = compiled_module_of(decoded.entry, target);
  return {Lookup::hit, FetchOutcome::hit, ""};
}

void RemoteCache::publish(const std::string& redis_key, const CacheKey& key, const CompiledModule& module) {
  std::vector<std::uint8_t> entry;
  try {
    entry = encode_entry(key, module, nvrtc_, static_cast<std::int64_t>(std::time(nullptr)));
  } catch (const std::exception& e) {
    warn_once("encode", "cannot encode " + module.module + ": " + e.what());
    return;
  }
  const std::string value = wrap_remote_value(
      redis_key, std::string_view(reinterpret_cast<const char*>(entry.data()), entry.size()), config_.secret);
  const auto reply = run({"SET", redis_key, value, "NX"});
  if (!reply) return;
  (reply->type == REDIS_REPLY_NIL ? counters_.publish_lost : counters_.publishes).fetch_add(1);
}

void RemoteCache::release(const std::string& lease, const std::string& token) {
  run({"EVAL", delete_if_same, "1", lease, token});
}

RemoteCache::Fetched RemoteCache::fetch_or_compile(const CacheKey& key, const std::string& module,
                                                   const Target& target,
                                                   const std::function<CompiledModule()>& compile) {
  auto compile_here = [&] {
    counters_.compiles.fetch_add(1);
    return compile();
  };
  if (!enabled()) return {compile(), false};
  if (distrusts(key)) return {compile_here(), false};
  const std::string redis_key = entry_key(key, module, target);
  const std::string lease = lease_key(key, module, target);
  const std::string token = token_prefix_ + std::to_string(lease_serial_.fetch_add(1));
  const std::string lease_ms = std::to_string(config_.lease.count());
  const std::string then = "; compiling here";
  const auto deadline = Clock::now() + config_.wait;
  bool waited = false;
  // Why no publish when occupied: the key holds a value this node must leave (another key's
  // entry, a stray type); SET NX could only lose.
  bool publishable = true;
  for (;;) {
    std::optional<CompiledModule> found;
    const Looked looked = lookup(redis_key, key, module, target, found, then);
    if (looked.lookup == Lookup::hit) {
      counters_.remote_hits.fetch_add(1);
      logger().debug("remote cache hit for {} on {}", module, target.name());
      return {std::move(*found), true};
    }
    if (looked.lookup == Lookup::unusable) break;
    if (looked.lookup == Lookup::occupied) {
      publishable = false;
      break;
    }
    const auto taken = run({"SET", lease, token, "NX", "PX", lease_ms});
    if (!taken) break;
    if (taken->type != REDIS_REPLY_NIL) {
      // Why look again: the holder we saw may have published and released between our GET and our
      // SET NX; without this second look that window gave a second compile of the key.
      std::optional<CompiledModule> published;
      const Looked again = lookup(redis_key, key, module, target, published, then);
      if (again.lookup == Lookup::hit) {
        release(lease, token);
        counters_.remote_hits.fetch_add(1);
        return {std::move(*published), true};
      }
      if (waited && (again.lookup == Lookup::absent || again.lookup == Lookup::deleted)) {
        counters_.lease_takeovers.fetch_add(1);
        logger().info("remote cache: took over the lease on {} for {} (its holder is gone)", module, target.name());
      }
      counters_.remote_misses.fetch_add(1);
      CompiledModule compiled;
      try {
        compiled = compile_here();
      } catch (...) {
        release(lease, token);
        throw;
      }
      if (again.lookup != Lookup::occupied) publish(redis_key, key, compiled);
      release(lease, token);
      return {std::move(compiled), false};
    }
    if (!waited) {
      waited = true;
      counters_.lease_waits.fetch_add(1);
      // Why: a lease key of another type (a stray key) is never released or expired by a node;
      // waiting on it would cost the whole wait for every such module.
      RedisFailure failure;
      const auto type = run({"TYPE", lease}, &failure);
      if (type && type->type == REDIS_REPLY_STATUS && reply_text(*type) != "string" && reply_text(*type) != "none") {
        note_wrong_type(lease, then);
        break;
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      counters_.wait_timeouts.fetch_add(1);
      warn_once("wait", "waited " + std::to_string(config_.wait.count()) + " ms for another node's compile of " +
                            module + " for " + target.name() + "; compiling here");
      break;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(poll_interval, deadline - now));
  }
  counters_.remote_misses.fetch_add(1);
  CompiledModule compiled = compile_here();
  // Skipped while resting; loses harmlessly if someone was first.
  if (publishable) publish(redis_key, key, compiled);
  return {std::move(compiled), false};
}

std::optional<CompiledModule> RemoteCache::fetch(const CacheKey& key, const std::string& module, const Target& target,
                                                 FetchReport* report) {
  std::optional<CompiledModule> found;
  if (distrusts(key)) {
    if (report) *report = {FetchOutcome::refused, "the driver refused this entry earlier in this process"};
    return found;
  }
  const Looked looked = lookup(entry_key(key, module, target), key, module, target, found, "");
  if (report) *report = {looked.outcome, looked.detail};
  if (looked.lookup == Lookup::hit) {
    counters_.remote_hits.fetch_add(1);
    return found;
  }
  counters_.remote_misses.fetch_add(1);
  return std::nullopt;
}

RemoteCache::PushResult RemoteCache::push(const CacheKey& key, std::string_view module, std::string_view target,
                                          const std::vector<std::uint8_t>& entry) {
  const std::string redis_key = entry_key_named(key, module, target);
  const std::string value = wrap_remote_value(
      redis_key, std::string_view(reinterpret_cast<const char*>(entry.data()), entry.size()), config_.secret);
  // Why twice at most: a key deleted between our SET NX and our TYPE is free again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    RedisFailure failure;
    const auto reply = run({"SET", redis_key, value, "NX"}, &failure);
    if (!reply) return failure.fault == RedisFault::oom ? PushResult::out_of_memory : PushResult::failed;
    if (reply->type != REDIS_REPLY_NIL) {
      counters_.publishes.fetch_add(1);
      return PushResult::stored;
    }
    // Why TYPE: SET NX answers nil for any existing key, and a stray key of another type is not
    // a kiln entry "already there".
    const auto type = run({"TYPE", redis_key}, &failure);
    if (!type || type->type != REDIS_REPLY_STATUS) return PushResult::failed;
    const std::string_view redis_type = reply_text(*type);
    if (redis_type == "string") {
      counters_.publish_lost.fetch_add(1);
      return PushResult::present;
    }
    if (redis_type != "none") {
      note_wrong_type(redis_key, "");
      return PushResult::wrong_type;
    }
  }
  return PushResult::failed;
}

void RemoteCache::distrust(const CacheKey& key) {
  const std::lock_guard<std::mutex> lock(distrusted_mutex_);
  distrusted_.insert(key.hex());
}

bool RemoteCache::distrusts(const CacheKey& key) {
  const std::lock_guard<std::mutex> lock(distrusted_mutex_);
  return distrusted_.count(key.hex()) != 0;
}

std::optional<RemoteStats> RemoteCache::stats(std::string& error) {
  if (!enabled()) {
    error = config_.disabled_reason.empty() ? "KILN_REMOTE_CACHE is not set" : config_.disabled_reason;
    return std::nullopt;
  }
  RemoteStats stats;
  // Why sets: SCAN may return a key more than once (while the server rehashes).
  std::set<std::string> entries, leases;
  std::string cursor = "0";
  const std::string pattern = "kiln:*";
  do {
    RedisFailure failure;
    const auto reply = run({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, &failure);
    if (!reply) {
      error = failure.message;
      return std::nullopt;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_ARRAY) {
      error = "SCAN at " + config_.endpoint->display() + ": a reply SCAN never gives";
      return std::nullopt;
    }
    cursor = std::string(reply_text(*reply->element[0]));
    const redisReply& keys = *reply->element[1];
    for (std::size_t i = 0; i < keys.elements; ++i) {
      if (keys.element[i]->type != REDIS_REPLY_STRING) continue;
      std::string name(reply_text(*keys.element[i]));
      if (name.rfind(lease_prefix, 0) == 0)
        leases.insert(std::move(name));
      else if (name.rfind(entry_prefix, 0) == 0)
        entries.insert(std::move(name));
    }
  } while (cursor != "0");
  stats.leases = leases.size();
  for (const auto& name : entries) {
    RedisFailure failure;
    const auto length = run({"STRLEN", name}, &failure);
    if (!length && failure.fault == RedisFault::wrong_type) {
      note_wrong_type(name, "");
      stats.wrong_type.push_back(name);
      continue;
    }
    if (!length) {
      error = failure.message;
      return std::nullopt;
    }
    if (length->type != REDIS_REPLY_INTEGER) {
      error = "STRLEN at " + config_.endpoint->display() + ": a reply STRLEN never gives";
      return std::nullopt;
    }
    // Why skipped: STRLEN of a key deleted since the SCAN is 0, and no kiln value is empty.
    if (length->integer <= 0) continue;
    const auto parsed = detail::parse_cache_file_name(std::string_view(name).substr(entry_prefix.size()));
    const auto bytes = static_cast<std::uint64_t>(length->integer);
    ++stats.entries;
    stats.bytes += bytes;
    auto& target = stats.per_target[parsed ? parsed->target : "?"];
    ++target.first;
    target.second += bytes;
  }
  return stats;
}

std::shared_ptr<RemoteCache> remote_cache_for(const Config& config) {
  // Why nvrtc_build: it is read from the library file, so the remote tier never loads NVRTC (a
  // process that finds its kernels in caches must not); the text is only written for people.
  const std::string& nvrtc = nvrtc_build();
  return std::make_shared<RemoteCache>(RemoteCacheConfig::from_config(config), nvrtc.empty() ? "unknown" : nvrtc);
}

std::shared_ptr<RemoteCache> process_remote_cache() {
  static const std::shared_ptr<RemoteCache> cache = remote_cache_for(current_config());
  return cache;
}

}  // namespace kiln

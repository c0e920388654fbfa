#include "cache/remote/remote_cache.hpp"

#include <unistd.h>

#include <ctime>
#include <random>
#include <set>
#include <thread>

#include <hiredis/hiredis.h>

#include "base/log.hpp"
#include "cache/disk/cache_entry.hpp"
#include "cache/disk/cache_names.hpp"
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
  else if (!config_.disabled_reason.empty())
    logger().warn("remote cache not used: {}", config_.disabled_reason);
}

RemoteCache::~RemoteCache() = default;

RemoteCacheStatus RemoteCache::status() const {
  RemoteCacheStatus status;
  status.enabled = enabled();
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
  out.signature_failures = counters_.signature_failures.load();
  out.corrupt = counters_.corrupt.load();
  out.timeouts = counters_.timeouts.load();
  out.errors = counters_.errors.load();
  out.skipped = counters_.skipped.load();
  return out;
}

std::string RemoteCache::entry_key(const CacheKey& key, const std::string& module, const Target& target) {
  return std::string(entry_prefix) + detail::entry_file_name(key, module, target.name());
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

bool RemoteCache::resting() const { return now_ns() < rest_until_ns_.load(); }

void RemoteCache::note_failure(const RedisFailure& failure) {
  (failure.fault == RedisFault::timeout ? counters_.timeouts : counters_.errors).fetch_add(1);
  // Why a server error does not rest the tier: the server is up and answering (e.g. OOM on one
  // SET under maxmemory); other commands may well succeed.
  if (failure.fault != RedisFault::server_error) {
    rest_until_ns_.store(now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(config_.retry).count());
    const std::lock_guard<std::mutex> lock(pool_mutex_);
    pool_.clear();
  }
  warn_once(std::string(to_string(failure.fault)),
            std::string(to_string(failure.fault)) + ": " + failure.message + "; using the local tiers (next try in " +
                std::to_string(config_.retry.count()) + " ms)");
}

detail::ReplyPtr RemoteCache::run(const std::vector<std::string_view>& args) {
  if (!enabled()) return nullptr;
  if (resting()) {
    counters_.skipped.fetch_add(1);
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
  RedisFailure failure;
  if (!connection) connection = detail::RedisConnection::open(config_, failure);
  if (!connection) {
    note_failure(failure);
    return nullptr;
  }
  auto reply = connection->command(args, failure);
  if (!reply) note_failure(failure);
  if (!connection->broken()) {
    const std::lock_guard<std::mutex> lock(pool_mutex_);
    if (pool_.size() < pool_limit) pool_.push_back(std::move(connection));
  }
  return reply;
}

void RemoteCache::refuse(const std::string& redis_key, const std::string& value, bool signature,
                         const std::string& why) {
  (signature ? counters_.signature_failures : counters_.corrupt).fetch_add(1);
  warn_once(signature ? "signature" : "corrupt",
            "refused '" + redis_key + "': " + why + "; deleted from Redis, compiling here");
  run({"EVAL", delete_if_same, "1", redis_key, value});
}

RemoteCache::Lookup RemoteCache::lookup(const std::string& redis_key, const CacheKey& key, const std::string& module,
                                        const Target& target, std::optional<CompiledModule>& found) {
  const auto reply = run({"GET", redis_key});
  if (!reply) return Lookup::unusable;
  if (reply->type == REDIS_REPLY_NIL) return Lookup::miss;
  if (reply->type != REDIS_REPLY_STRING) {
    note_failure({RedisFault::protocol, "GET returned reply type " + std::to_string(reply->type)});
    return Lookup::unusable;
  }
  const std::string value(reply_text(*reply));
  const RemoteValue opened = unwrap_remote_value(redis_key, value, config_.secret);
  if (opened.fault != RemoteValueFault::none) {
    refuse(redis_key, value, opened.fault != RemoteValueFault::bad_envelope, std::string(to_string(opened.fault)));
    return Lookup::miss;
  }
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(opened.entry.data());
  const EntryDecode decoded = decode_entry(bytes, opened.entry.size(), key);
  if (!decoded.ok()) {
    refuse(redis_key, value, false, std::string(to_string(decoded.fault)) + ": " + decoded.detail);
    return Lookup::miss;
  }
  if (decoded.entry.module != module || decoded.entry.target != target.name()) {
    refuse(redis_key, value, false,
           "holds module '" + std::string(decoded.entry.module) + "' for '" + std::string(decoded.entry.target) + "'");
    return Lookup::miss;
  }
  found = compiled_module_of(decoded.entry, target);
  return Lookup::hit;
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
  const auto deadline = Clock::now() + config_.wait;
  bool waited = false;
  for (;;) {
    std::optional<CompiledModule> found;
    const Lookup looked = lookup(redis_key, key, module, target, found);
    if (looked == Lookup::hit) {
      counters_.remote_hits.fetch_add(1);
      logger().debug("remote cache hit for {} on {}", module, target.name());
      return {std::move(*found), true};
    }
    if (looked == Lookup::unusable) break;
    const auto taken = run({"SET", lease, token, "NX", "PX", lease_ms});
    if (!taken) break;
    if (taken->type != REDIS_REPLY_NIL) {
      // Why look again: the holder we saw may have published and released between our GET and our
      // SET NX; without this second look that window gave a second compile of the key.
      std::optional<CompiledModule> published;
      const Lookup again = lookup(redis_key, key, module, target, published);
      if (again == Lookup::hit) {
        release(lease, token);
        counters_.remote_hits.fetch_add(1);
        return {std::move(*published), true};
      }
      if (waited && again == Lookup::miss) {
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
      publish(redis_key, key, compiled);
      release(lease, token);
      return {std::move(compiled), false};
    }
    if (!waited) {
      waited = true;
      counters_.lease_waits.fetch_add(1);
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
  publish(redis_key, key, compiled);  // skipped while resting; loses harmlessly if someone was first
  return {std::move(compiled), false};
}

std::optional<CompiledModule> RemoteCache::fetch(const CacheKey& key, const std::string& module,
                                                 const Target& target) {
  std::optional<CompiledModule> found;
  if (distrusts(key)) return found;
  if (lookup(entry_key(key, module, target), key, module, target, found) == Lookup::hit) {
    counters_.remote_hits.fetch_add(1);
    return found;
  }
  counters_.remote_misses.fetch_add(1);
  return std::nullopt;
}

RemoteCache::PushResult RemoteCache::push(const CacheKey& key, std::string_view module, std::string_view target,
                                          const std::vector<std::uint8_t>& entry) {
  const std::string redis_key = std::string(entry_prefix) + detail::entry_file_name(key, module, target);
  const std::string value = wrap_remote_value(
      redis_key, std::string_view(reinterpret_cast<const char*>(entry.data()), entry.size()), config_.secret);
  const auto reply = run({"SET", redis_key, value, "NX"});
  if (!reply) return PushResult::failed;
  if (reply->type == REDIS_REPLY_NIL) {
    counters_.publish_lost.fetch_add(1);
    return PushResult::present;
  }
  counters_.publishes.fetch_add(1);
  return PushResult::stored;
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
    const auto reply = run({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING || reply->element[1]->type != REDIS_REPLY_ARRAY) {
      error = "SCAN failed at " + config_.endpoint->display() + " (see the warning above)";
      return std::nullopt;
    }
    cursor = std::string(reply_text(*reply->element[0]));
    const redisReply& keys = *reply->element[1];
    for (std::size_t i = 0; i < keys.elements; ++i) {
      std::string name(reply_text(*keys.element[i]));
      if (name.rfind(lease_prefix, 0) == 0)
        leases.insert(std::move(name));
      else if (name.rfind(entry_prefix, 0) == 0)
        entries.insert(std::move(name));
    }
  } while (cursor != "0");
  stats.leases = leases.size();
  for (const auto& name : entries) {
    const auto length = run({"STRLEN", name});
    if (!length || length->type != REDIS_REPLY_INTEGER) {
      error = "STRLEN failed at " + config_.endpoint->display();
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

std::shared_ptr<RemoteCache> process_remote_cache() {
  static const std::shared_ptr<RemoteCache> cache = [] {
    // Why nvrtc_build: it is read from the library file, so the remote tier never loads NVRTC (a
    // process that finds its kernels in caches must not); the text is only written for people.
    const std::string& nvrtc = nvrtc_build();
    return std::make_shared<RemoteCache>(RemoteCacheConfig::from_env(), nvrtc.empty() ? "unknown" : nvrtc);
  }();
  return cache;
}

}  // namespace kiln

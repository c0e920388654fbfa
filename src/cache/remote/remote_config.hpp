#pragma once
/// @file
/// The remote (Redis) tier's settings: where the server is, how long kiln may wait for it, and the
/// shared secret that signs entries. Pure parsing plus from_env, so every rule is tested without
/// a server.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

/// Where the Redis server is: `redis://[user:password@]host:port[/db]` (an IPv6 address in
/// brackets: `redis://[::1]:6379`) or `unix:///path`.
struct RedisEndpoint {
  std::string host;         ///< empty for a unix socket; an IPv6 address without its brackets
  int port = 6379;
  std::string socket_path;  ///< set for unix://
  std::string user;         ///< empty: AUTH with the password only (requirepass)
  std::string password;     ///< empty: no AUTH
  int db = 0;

  /// The URL without the password, for logs and `kiln info`.
  std::string display() const;
};

/// Parses a KILN_REMOTE_CACHE URL. Throws kiln::Error naming what is wrong and the accepted form,
/// with the URL shown as redact_url shows it (never the password).
RedisEndpoint parse_redis_url(std::string_view url);

/// `url` with its password replaced by `***`, whether or not it parses: everything between the
/// user's ':' (or the start of the credentials when there is no ':') and the last '@'.
std::string redact_url(std::string_view url);

struct Config;

struct RemoteCacheConfig {
  /// Nothing: no remote tier (`disabled_reason` says why, empty when simply not configured).
  std::optional<RedisEndpoint> endpoint;
  std::string disabled_reason;
  /// KILN_REMOTE_CACHE is set: the operator asked for the tier, so its being off is an error that
  /// `kiln info` and `kiln warm` report with exit status 1 (requested_but_off()).
  bool requested = false;
  std::chrono::milliseconds connect_timeout{100};
  std::chrono::milliseconds command_timeout{500};
  /// How long a lease on a key lives without its holder: a holder that dies frees the key after this.
  std::chrono::milliseconds lease{10000};
  /// How long a node waits for another node's compile before compiling itself.
  std::chrono::milliseconds wait{15000};
  /// After a failure (down, slow, refused), how long the tier is left alone before one new try.
  std::chrono::milliseconds retry{2000};
  /// The shared secret of KILN_REMOTE_CACHE_KEY_FILE; empty: entries are neither signed nor required to be.
  std::string secret;
  std::string key_file;  ///< where `secret` came from, for messages

  /// The tier was asked for (KILN_REMOTE_CACHE set) but a setting turned it off.
  bool requested_but_off() const noexcept { return requested && !endpoint; }

  /// From `KILN_REMOTE_CACHE` (the URL), `KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS`,
  /// `KILN_REMOTE_CACHE_TIMEOUT_MS`, `KILN_REMOTE_CACHE_LEASE_MS`, `KILN_REMOTE_CACHE_WAIT_MS`,
  /// `KILN_REMOTE_CACHE_RETRY_MS` and `KILN_REMOTE_CACHE_KEY_FILE`. A bad URL, or a key-file
  /// variable that is set but empty, or a key file that is missing, empty, short, not a regular
  /// file, not this user's or readable by group or others, turns the tier off with `disabled_reason`
  /// (never on without the signing the operator asked for); a bad number warns once and gives the
  /// default.
  static RemoteCacheConfig from_env();
  /// The same from a configuration's values (base/config.hpp): from_env is from_config(current_config()).
  static RemoteCacheConfig from_config(const Config& config);
};

}  // namespace kiln

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

/// Where the Redis server is: `redis://[user:password@]host:port[/db]` or `unix:///path`.
struct RedisEndpoint {
  std::string host;         ///< empty for a unix socket
  int port = 6379;
  std::string socket_path;  ///< set for unix://
  std::string user;         ///< empty: AUTH with the password only (requirepass)
  std::string password;     ///< empty: no AUTH
  int db = 0;

  /// The URL without the password, for logs and `kiln info`.
  std::string display() const;
};

/// Parses a KILN_REMOTE_CACHE URL. Throws kiln::Error naming what is wrong and the accepted form.
RedisEndpoint parse_redis_url(std::string_view url);

struct RemoteCacheConfig {
  /// Nothing: no remote tier (`disabled_reason` says why, empty when simply not configured).
  std::optional<RedisEndpoint> endpoint;
  std::string disabled_reason;
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

  /// From `KILN_REMOTE_CACHE` (the URL), `KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS`,
  /// `KILN_REMOTE_CACHE_TIMEOUT_MS`, `KILN_REMOTE_CACHE_LEASE_MS`, `KILN_REMOTE_CACHE_WAIT_MS`,
  /// `KILN_REMOTE_CACHE_RETRY_MS` and `KILN_REMOTE_CACHE_KEY_FILE`. A bad URL, or a key file that is
  /// missing, empty, not a regular file or readable by group or others, turns the tier off with
  /// `disabled_reason` (never on without the signing the operator asked for); a bad number warns
  /// once and gives the default.
  static RemoteCacheConfig from_env();
};

}  // namespace kiln

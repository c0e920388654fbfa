#pragma once
// One hiredis connection with kiln's timeouts: connect, AUTH and SELECT share one deadline of the
// connect timeout, and commands get the command timeout. Both are socket timeouts (SO_RCVTIMEO and
// SO_SNDTIMEO), so they bound each read or write, not a whole reply: a server that trickles its
// reply is not cut off. Not thread-safe: one thread at a time (the RemoteCache keeps a pool). Internal.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/remote/remote_config.hpp"

struct redisContext;
struct redisReply;

namespace kiln::detail {

/// Why a Redis call failed; each cause is warned about once per process and counted.
enum class RedisFault {
  none,
  timeout,       ///< the connect or command timeout ran out (a slow or stuck server)
  unreachable,   ///< connect refused, no route, no such socket (down or restarting)
  auth,          ///< AUTH refused, or the server wants a password we do not have
  io,            ///< the connection broke mid-command (server killed, network)
  protocol,      ///< a reply hiredis cannot parse, or of a type the command never returns (garbage)
  server_error,  ///< the server answered with an error (READONLY, a disabled command, ...)
  oom,           ///< the server refused a write with OOM: maxmemory reached under noeviction
  wrong_type,    ///< WRONGTYPE: the key holds another Redis type (a stray key, not kiln's)
};
std::string_view to_string(RedisFault fault);

struct RedisFailure {
  RedisFault fault = RedisFault::none;
  std::string message;
};

struct ReplyDeleter {
  void operator()(redisReply* reply) const noexcept;
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisConnection {
 public:
  /// Connects, authenticates and selects the database; nullptr with `failure` filled otherwise.
  static std::unique_ptr<RedisConnection> open(const RemoteCacheConfig& config, RedisFailure& failure);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  /// Sends one command (binary-safe arguments) and returns its reply; an error reply is a
  /// server_error (auth for NOAUTH/WRONGPASS, oom for OOM, wrong_type for WRONGTYPE). On failure
  /// returns nullptr and fills `failure`, whose message names the command, the server and, for a
  /// timeout, the timeout (never an argument: AUTH's is the password); after a timeout, io or
  /// protocol failure the connection is broken() and must be dropped.
  ReplyPtr command(const std::vector<std::string_view>& args, RedisFailure& failure);
  bool broken() const noexcept { return broken_; }

 private:
  RedisConnection(redisContext* context, std::string where) : context_(context), where_(std::move(where)) {}
  redisContext* context_;
  std::string where_;                     ///< the endpoint's display(), for messages
  std::chrono::milliseconds timeout_{0};  ///< the socket timeout now set, for messages
  const char* timeout_source_ = "";       ///< the setting it comes from, for messages
  bool broken_ = false;
};

}  // namespace kiln::detail

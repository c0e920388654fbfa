// RedisConnection: hiredis 0.14 (Debian 12) with kiln's timeouts and failure causes.
#include "cache/remote/redis_connection.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <hiredis/hiredis.h>

namespace kiln::detail {

namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Why from the text and errno: hiredis 0.14 has no REDIS_ERR_TIMEOUT; a socket timeout surfaces
// as REDIS_ERR_IO carrying EAGAIN (commands) or ETIMEDOUT/EINPROGRESS (connect).
bool is_timeout(int saved_errno, const char* errstr) {
  if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT || saved_errno == EINPROGRESS)
    return true;
  for (int e : {EAGAIN, ETIMEDOUT, EINPROGRESS})
    if (std::strstr(errstr, std::strerror(e)) != nullptr) return true;
  return false;
}

RedisFault classify_context_error(const redisContext* context, int saved_errno, bool connecting) {
  if (context->err == REDIS_ERR_PROTOCOL || context->err == REDIS_ERR_OOM) return RedisFault::protocol;
  if (is_timeout(saved_errno, context->errstr)) return RedisFault::timeout;
  return connecting ? RedisFault::unreachable : RedisFault::io;
}

RedisFault classify_error_reply(std::string_view text) {
  if (text.rfind("OOM", 0) == 0) return RedisFault::oom;
  if (text.rfind("WRONGTYPE", 0) == 0) return RedisFault::wrong_type;
  if (text.rfind("NOAUTH", 0) == 0 || text.rfind("WRONGPASS", 0) == 0 || text.rfind("ERR invalid password", 0) == 0 ||
      text.find("AUTH") != std::string_view::npos)
    return RedisFault::auth;
  return RedisFault::server_error;
}

// Why: hiredis 0.14 writes with write(2), not send(MSG_NOSIGNAL); a write on a connection whose
// reset was already reported (EPIPE rather than ECONNRESET) raises SIGPIPE, which kills the
// process by default. A library must not change the
// process's handlers, so SIGPIPE is blocked for this thread during a command, and one raised by it
// is consumed before the mask is restored (the write then fails with EPIPE, an io failure).
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~SigpipeBlock() {
    if (!blocked_) return;
    sigset_t pending;
    sigemptyset(&pending);
    if (!was_pending_ && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
  bool blocked_ = false;
};

}  // namespace

std::string_view to_string(RedisFault fault) {
  switch (fault) {
    case RedisFault::none: return "none";
    case RedisFault::timeout: return "timeout";
    case RedisFault::unreachable: return "unreachable";
    case RedisFault::auth: return "authentication refused";
    case RedisFault::io: return "connection lost";
    case RedisFault::protocol: return "garbled reply";
    case RedisFault::server_error: return "server error";
    case RedisFault::oom: return "out of memory (maxmemory reached)";
    case RedisFault::wrong_type: return "wrong type";
  }
  return "unknown";
}

void ReplyDeleter::operator()(redisReply* reply) const noexcept { freeReplyObject(reply); }

std::unique_ptr<RedisConnection> RedisConnection::open(const RemoteCacheConfig& config, RedisFailure& failure) {
  const RedisEndpoint& endpoint = *config.endpoint;
  // Why one deadline: AUTH and SELECT are part of getting a connection, so together with the
  // connect they get the connect timeout once, not once each.
  const auto deadline = std::chrono::steady_clock::now() + config.connect_timeout;
  const timeval connect_tv = to_timeval(config.connect_timeout);
  errno = 0;
  redisContext* context = endpoint.socket_path.empty()
                              ? redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, connect_tv)
                              : redisConnectUnixWithTimeout(endpoint.socket_path.c_str(), connect_tv);
  const int saved_errno = errno;
  if (context == nullptr) {
    failure = {RedisFault::protocol, "cannot allocate a hiredis context"};
    return nullptr;
  }
  const std::string where = endpoint.display();
  const std::string connect_ms = std::to_string(config.connect_timeout.count()) + " ms";
  if (context->err != 0) {
    const RedisFault fault = classify_context_error(context, saved_errno, true);
    failure = {fault, fault == RedisFault::timeout
                          ? "connect to " + where + ": no connection within " + connect_ms +
                                " (KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS)"
                          : "connect to " + where + " (connect timeout " + connect_ms + "): " + context->errstr};
    redisFree(context);
    return nullptr;
  }
  std::unique_ptr<RedisConnection> connection(new RedisConnection(context, where));
  // What is left of the deadline becomes the socket timeout of the next step; none left fails it,
  // because a zero SO_RCVTIMEO would mean no timeout at all.
  const auto time_left_for = [&](const std::string& step) {
    using std::chrono::milliseconds;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      failure = {RedisFault::timeout, "the connect timeout of " + connect_ms + " (KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS)" +
                                          " ran out before " + step + " at " + where};
      return false;
    }
    if (redisSetTimeout(context, to_timeval(left)) != REDIS_OK) {
      failure = {RedisFault::io, "cannot set the socket timeout for " + where};
      return false;
    }
    connection->timeout_ = left;
    connection->timeout_source_ = "what was left of KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS";
    return true;
  };
  if (!endpoint.password.empty()) {
    if (!time_left_for("AUTH")) return nullptr;
    std::vector<std::string_view> auth{"AUTH"};
    if (!endpoint.user.empty()) auth.push_back(endpoint.user);
    auth.push_back(endpoint.password);
    if (!connection->command(auth, failure)) {
      if (failure.fault == RedisFault::server_error) failure.fault = RedisFault::auth;
      return nullptr;
    }
  }
  if (endpoint.db != 0) {
    const std::string db = std::to_string(endpoint.db);
    if (!time_left_for("SELECT " + db)) return nullptr;
    if (!connection->command({"SELECT", db}, failure)) {
      failure.message = "SELECT " + db + ": " + failure.message;
      return nullptr;
    }
  }
  if (redisSetTimeout(context, to_timeval(config.command_timeout)) != REDIS_OK) {
    failure = {RedisFault::io, "cannot set the socket timeout for " + where};
    return nullptr;
  }
  connection->timeout_ = config.command_timeout;
  connection->timeout_source_ = "KILN_REMOTE_CACHE_TIMEOUT_MS";
  return connection;
}

RedisConnection::~RedisConnection() { redisFree(context_); }

ReplyPtr RedisConnection::command(const std::vector<std::string_view>& args, RedisFailure& failure) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  int saved_errno = 0;
  ReplyPtr reply;
  {
    const SigpipeBlock no_sigpipe;
    errno = 0;
    reply.reset(static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data())));
    saved_errno = errno;
  }
  // Why only the command's name: the arguments are keys, values and AUTH's password.
  const std::string what = std::string(args.front()) + " at " + where_;
  if (!reply) {
    broken_ = true;
    const RedisFault fault = classify_context_error(context_, saved_errno, false);
    failure = {fault, fault == RedisFault::timeout
                          ? what + ": no reply within " + std::to_string(timeout_.count()) + " ms (" +
                                timeout_source_ + ")"
                          : what + ": " + context_->errstr};
    return nullptr;
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    const std::string_view text(reply->str, reply->len);
    failure = {classify_error_reply(text), what + ": " + std::string(text)};
    return nullptr;
  }
  return reply;
}

}  // namespace kiln::detail

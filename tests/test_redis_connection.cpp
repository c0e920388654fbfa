// RedisConnection against a server that resets the connection in the middle of a large command:
// an io failure and a broken connection (the cache then drops it), the thread's signal mask as it
// was and no SIGPIPE left pending (commands run with SIGPIPE blocked, see redis_connection.cpp).
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "cache/remote/redis_connection.hpp"

using namespace kiln;

TEST_CASE("a server that resets mid-command is an io failure, not SIGPIPE") {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), length) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);

  std::thread server([listener] {
    const int peer = ::accept(listener, nullptr, nullptr);
    char buffer[4096];
    (void)::recv(peer, buffer, sizeof buffer, 0);
    const linger reset{1, 0};
    ::setsockopt(peer, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    ::close(peer);
  });

  RemoteCacheConfig config;
  config.endpoint = parse_redis_url("redis://127.0.0.1:" + std::to_string(ntohs(address.sin_port)));
  config.command_timeout = std::chrono::milliseconds(2000);
  detail::RedisFailure failure;
  auto connection = detail::RedisConnection::open(config, failure);
  REQUIRE(connection);

  sigset_t before;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  const std::string value(64 << 20, 'x');  // far more than the socket buffers: several write(2)s
  const auto reply = connection->command({"SET", "k", value}, failure);
  server.join();
  ::close(listener);

  CHECK_FALSE(reply);
  CHECK(connection->broken());
  CHECK((failure.fault == detail::RedisFault::io || failure.fault == detail::RedisFault::timeout));
  sigset_t after;
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  CHECK(sigismember(&after, SIGPIPE) == sigismember(&before, SIGPIPE));
  sigset_t pending;
  sigpending(&pending);
  CHECK(sigismember(&pending, SIGPIPE) == 0);
}

// RedisConnection against a server that resets the connection in the middle of a large command:
// an io failure and a broken connection (the cache then drops it), the thread's signal mask as it
// was and no SIGPIPE left pending (commands run with SIGPIPE blocked, see redis_connection.cpp).
// Against a server slow to answer AUTH and SELECT: one connect timeout bounds the two together.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "cache/remote/redis_connection.hpp"
#include "closed_port.hpp"

using namespace kiln;
using namespace std::chrono_literals;

namespace {

/// A loopback server that answers each of the first two commands "+OK" after `delay`.
class SlowServer {
 public:
  explicit SlowServer(std::chrono::milliseconds delay) : listener_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) == 0);
    REQUIRE(::listen(listener_, 4) == 0);
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, delay] {
      const int peer = ::accept(listener_, nullptr, nullptr);
      char buffer[4096];
      for (int command = 0; command < 2 && ::recv(peer, buffer, sizeof buffer, 0) > 0; ++command) {
        std::this_thread::sleep_for(delay);  // the slow answer under test, not a wait for an event
        if (::send(peer, "+OK\r\n", 5, MSG_NOSIGNAL) != 5) break;
      }
      ::close(peer);
    });
  }
  ~SlowServer() {
    thread_.join();
    ::close(listener_);
  }
  SlowServer(const SlowServer&) = delete;
  SlowServer& operator=(const SlowServer&) = delete;
  int port() const { return port_; }

 private:
  int listener_;
  int port_ = 0;
  std::thread thread_;
};

/// Connects with a password and database 1, so that both AUTH and SELECT are sent.
std::unique_ptr<detail::RedisConnection> open_with_auth_and_select(int port, std::chrono::milliseconds timeout,
                                                                   detail::RedisFailure& failure) {
  RemoteCacheConfig config;
  config.endpoint = parse_redis_url("redis://:secret@127.0.0.1:" + std::to_string(port) + "/1");
  config.connect_timeout = timeout;
  return detail::RedisConnection::open(config, failure);
}

}  // namespace

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

TEST_CASE("connect, AUTH and SELECT share one connect timeout, not one each") {
  // Each reply takes 60% of the timeout: AUTH fits, and SELECT would too with a timeout of its own.
  detail::RedisFailure failure;
  {
    SlowServer server(600ms);
    const auto start = std::chrono::steady_clock::now();
    const auto connection = open_with_auth_and_select(server.port(), 1000ms, failure);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK_FALSE(connection);
    CHECK(failure.fault == detail::RedisFault::timeout);
    CHECK_THAT(failure.message, Catch::Contains("SELECT 1"));
    CHECK(took < 1500ms);
  }
  // The control: with room for both replies, the same server gives a connection.
  SlowServer server(600ms);
  CHECK(open_with_auth_and_select(server.port(), 3000ms, failure));
}

TEST_CASE("a command timeout names the server, the command and the timeout") {
  SlowServer server(600ms);
  RemoteCacheConfig config;
  config.endpoint = parse_redis_url("redis://127.0.0.1:" + std::to_string(server.port()));
  config.command_timeout = 100ms;
  detail::RedisFailure failure;
  auto connection = detail::RedisConnection::open(config, failure);
  REQUIRE(connection);
  CHECK_FALSE(connection->command({"GET", "kiln:entry:x"}, failure));
  CHECK(failure.fault == detail::RedisFault::timeout);
  CHECK_THAT(failure.message, Catch::Contains("GET"));
  CHECK_THAT(failure.message, Catch::Contains("127.0.0.1:" + std::to_string(server.port())));
  CHECK_THAT(failure.message, Catch::Contains("100 ms"));
  connection.reset();  // lets the server's thread see the close and end
}

TEST_CASE("a refused connect names the server and the connect timeout") {
  const std::string where = "127.0.0.1:" + std::to_string(test::closed_loopback_port());
  RemoteCacheConfig config;
  config.endpoint = parse_redis_url("redis://" + where);
  config.connect_timeout = 250ms;
  detail::RedisFailure failure;
  CHECK_FALSE(detail::RedisConnection::open(config, failure));
  CHECK(failure.fault == detail::RedisFault::unreachable);
  CHECK_THAT(failure.message, Catch::Contains(where));
  CHECK_THAT(failure.message, Catch::Contains("250 ms"));
  CHECK_THAT(failure.message, Catch::Contains("refused"));
}

// The C ABI's remote-tier counters (kiln_cache_stats v2): filled from the process's tier, and a
// v1-sized struct is written no further than its 144 bytes. The tier points at a closed loopback
// port, so a lookup counts one error without any server.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cache/cache_key.hpp"
#include "cache/remote/remote_cache.hpp"
#include "kiln/kiln.h"

namespace {

int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);  // nothing listens there now
  return ntohs(address.sin_port);
}

}  // namespace

TEST_CASE("C ABI: kiln_cache_stats v2 carries the remote tier's state and counters") {
  const std::string url = "redis://127.0.0.1:" + std::to_string(closed_port());
  ::setenv("KILN_REMOTE_CACHE", url.c_str(), 1);
  ::setenv("KILN_CACHE", "0", 1);
  const auto remote = kiln::process_remote_cache();
  REQUIRE(remote->enabled());
  CHECK_FALSE(remote->fetch(kiln::CacheKey{}, "m", kiln::Target{{9, 0}, true, kiln::OutputKind::cubin}));

  kiln_service* service = nullptr;
  REQUIRE(kiln_service_create(0, &service) == KILN_OK);
  kiln_cache_stats stats{};
  stats.struct_size = sizeof stats;
  REQUIRE(kiln_service_cache_stats(service, &stats) == KILN_OK);
  CHECK(stats.remote_enabled == 1);
  CHECK(stats.remote_signed == 0);
  CHECK(stats.remote_errors == 1);
  CHECK(stats.remote_misses == 1);
  CHECK(stats.remote_hits == 0);

  // A v1 caller: the bytes past KILN_CACHE_STATS_V1_SIZE stay as the caller left them.
  kiln_cache_stats v1;
  std::memset(&v1, 0xab, sizeof v1);
  v1.struct_size = KILN_CACHE_STATS_V1_SIZE;
  REQUIRE(kiln_service_cache_stats(service, &v1) == KILN_OK);
  CHECK(v1.struct_size == KILN_CACHE_STATS_V1_SIZE);
  const auto* tail = reinterpret_cast<const unsigned char*>(&v1) + KILN_CACHE_STATS_V1_SIZE;
  for (std::size_t i = 0; i < sizeof v1 - KILN_CACHE_STATS_V1_SIZE; ++i) CHECK(tail[i] == 0xab);
  kiln_service_destroy(service);
}

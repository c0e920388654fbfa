// The C ABI's remote-tier counters (kiln_cache_stats v2): filled from the process's tier, and a
// v1-sized struct is written no further than its 144 bytes. The tier points at a closed loopback
// port, so a lookup counts one error without any server.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cache/cache_key.hpp"
#include "cache/remote/remote_cache.hpp"
#include "closed_port.hpp"
#include "kiln/kiln.h"

TEST_CASE("C ABI: kiln_cache_stats v2 carries the remote tier's state and counters") {
  const std::string url = "redis://127.0.0.1:" + std::to_string(kiln::test::closed_loopback_port());
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

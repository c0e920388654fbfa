// Fuzz target: what a fleet's Redis (or its operator) hands kiln. The bytes are taken as
//   a Redis value: unwrap_remote_value without a secret and with one, then decode_entry on what passes;
//   a KILN_REMOTE_CACHE URL: parse_redis_url.
// Invariants: an unwrapped entry lies inside the value; a value passes a keyed check only if it is
// exactly what wrap_remote_value makes for that key, entry and secret; wrap -> unwrap round-trips;
// a URL parses to a port in 1..65535 and a host or absolute socket path, or throws kiln::Error
// naming KILN_REMOTE_CACHE.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cache/disk/cache_entry.hpp"
#include "cache/remote/remote_config.hpp"
#include "cache/remote/remote_value.hpp"
#include "kiln/error.hpp"

namespace {

using namespace kiln;

void require(bool condition) {
  if (!condition) std::abort();
}

const std::string redis_key = "kiln:entry:m.sm_90a.00000000000000000000000000000000.kiln";
const std::string secret = "fuzz-secret-0123456789";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view value(reinterpret_cast<const char*>(data), size);

  const RemoteValue open = unwrap_remote_value(redis_key, value, "");
  if (open.fault == RemoteValueFault::none) {
    require(open.entry.data() == value.data() + remote_value_header_bytes);
    require(open.entry.size() == size - remote_value_header_bytes);
    decode_entry(reinterpret_cast<const std::uint8_t*>(open.entry.data()), open.entry.size(), CacheKey{});
  }
  const RemoteValue keyed = unwrap_remote_value(redis_key, value, secret);
  if (keyed.fault == RemoteValueFault::none) require(wrap_remote_value(redis_key, keyed.entry, secret) == value);
  for (const std::string_view with : {std::string_view(), std::string_view(secret)}) {
    const std::string wrapped = wrap_remote_value(redis_key, value, with);
    const RemoteValue back = unwrap_remote_value(redis_key, wrapped, with);
    require(back.fault == RemoteValueFault::none && back.entry == value);
  }

  try {
    const RedisEndpoint endpoint = parse_redis_url(value);
    require(endpoint.socket_path.empty() ? !endpoint.host.empty() && endpoint.port >= 1 && endpoint.port <= 65535
                                         : endpoint.socket_path.front() == '/');
  } catch (const Error& e) {
    require(std::string(e.what()).find("KILN_REMOTE_CACHE") != std::string::npos);
  }
  return 0;
}

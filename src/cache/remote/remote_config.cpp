// RemoteCacheConfig::from_env and the pieces it parses: the Redis URL and the signing key file.
#include "cache/remote/remote_config.hpp"

#include <limits>

#include "base/env.hpp"
#include "base/log.hpp"
#include "cache/fleet_signing.hpp"
#include "kiln/error.hpp"

namespace kiln {

namespace {

constexpr std::string_view url_form = "redis://[user:password@]host[:port][/db] or unix:///path/to/redis.sock";

[[noreturn]] void bad_url(std::string_view url, const std::string& why) {
  throw_invalid_argument("KILN_REMOTE_CACHE", std::string(url_form), "'" + std::string(url) + "' (" + why + ")");
}

std::optional<long> parse_int(std::string_view text, long low, long high) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < low || value > high) return std::nullopt;
  return value;
}

// Why percent-decoding: a password may hold '@', ':' or '/', which the URL can only carry encoded.
std::string percent_decode(std::string_view url, std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    auto hex = [&](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= text.size()) bad_url(url, "'%' without two hex digits");
    const int high = hex(text[i + 1]), low = hex(text[i + 2]);
    if (high < 0 || low < 0) bad_url(url, "'%' without two hex digits");
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

std::chrono::milliseconds ms_from_env(const char* name, std::chrono::milliseconds fallback) {
  const auto text = env_value(name);
  if (!text) return fallback;
  if (const auto value = parse_int(*text, 1, 3600000)) return std::chrono::milliseconds(*value);
  logger().warn("{}='{}' is not a number of milliseconds in 1..3600000; using {}", name, *text, fallback.count());
  return fallback;
}

}  // namespace

std::string RedisEndpoint::display() const {
  if (!socket_path.empty()) return "unix://" + socket_path;
  std::string out = "redis://";
  if (!user.empty() || !password.empty()) out += (user.empty() ? "" : user) + (password.empty() ? "@" : ":***@");
  return out + host + ":" + std::to_string(port) + (db != 0 ? "/" + std::to_string(db) : "");
}

RedisEndpoint parse_redis_url(std::string_view url) {
  RedisEndpoint endpoint;
  if (url.rfind("unix://", 0) == 0) {
    endpoint.socket_path = std::string(url.substr(7));
    if (endpoint.socket_path.empty() || endpoint.socket_path.front() != '/')
      bad_url(url, "a unix socket needs an absolute path");
    return endpoint;
  }
  if (url.rfind("redis://", 0) != 0) bad_url(url, "unknown scheme");
  std::string_view rest = url.substr(8);
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view credentials = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = credentials.find(':');
    if (colon == std::string_view::npos) {
      endpoint.password = percent_decode(url, credentials);  // redis://password@host, as redis-cli takes it
    } else {
      endpoint.user = percent_decode(url, credentials.substr(0, colon));
      endpoint.password = percent_decode(url, credentials.substr(colon + 1));
    }
    if (endpoint.password.empty()) bad_url(url, "an '@' without a password");
  }
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    const auto db = parse_int(rest.substr(slash + 1), 0, std::numeric_limits<int>::max());
    if (!db) bad_url(url, "the database after '/' must be a number");
    endpoint.db = static_cast<int>(*db);
    rest = rest.substr(0, slash);
  }
  if (const auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    const auto port = parse_int(rest.substr(colon + 1), 1, 65535);
    if (!port) bad_url(url, "the port must be a number in 1..65535");
    endpoint.port = static_cast<int>(*port);
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) bad_url(url, "no host");
  endpoint.host = std::string(rest);
  return endpoint;
}

RemoteCacheConfig RemoteCacheConfig::from_env() {
  RemoteCacheConfig config;
  config.connect_timeout = ms_from_env("KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS", config.connect_timeout);
  config.command_timeout = ms_from_env("KILN_REMOTE_CACHE_TIMEOUT_MS", config.command_timeout);
  config.lease = ms_from_env("KILN_REMOTE_CACHE_LEASE_MS", config.lease);
  config.wait = ms_from_env("KILN_REMOTE_CACHE_WAIT_MS", config.wait);
  config.retry = ms_from_env("KILN_REMOTE_CACHE_RETRY_MS", config.retry);
  const auto url = env_value("KILN_REMOTE_CACHE");
  if (!url) return config;
  try {
    if (const auto key_file = env_value(fleet_key_variable)) config.secret = read_fleet_key_file(*key_file);
    config.endpoint = parse_redis_url(*url);
  } catch (const std::exception& e) {
    config.disabled_reason = e.what();
  }
  return config;
}

}  // namespace kiln

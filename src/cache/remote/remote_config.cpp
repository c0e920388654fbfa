// RemoteCacheConfig::from_config and the pieces it parses: the Redis URL and the signing key file.
#include "cache/remote/remote_config.hpp"

#include <limits>

#include "base/config.hpp"
#include "cache/fleet_signing.hpp"
#include "kiln/error.hpp"

namespace kiln {

namespace {

constexpr std::string_view url_form =
    "redis://[user:password@]host[:port][/db] (IPv6: redis://[::1]:6379) or unix:///path/to/redis.sock";

// Why redact_url: the URL may carry the password, and this message reaches logs, `kiln info` and
// its JSON (SECURITY.md: no secret is ever printed).
[[noreturn]] void bad_url(std::string_view url, const std::string& why) {
  throw_invalid_argument("KILN_REMOTE_CACHE", std::string(url_form), "'" + redact_url(url) + "' (" + why + ")");
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

}  // namespace

std::string RedisEndpoint::display() const {
  if (!socket_path.empty()) return "unix://" + socket_path;
  std::string out = "redis://";
  if (!user.empty() || !password.empty()) out += (user.empty() ? "" : user) + (password.empty() ? "@" : ":***@");
  const bool ipv6 = host.find(':') != std::string::npos;
  return out + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port) +
         (db != 0 ? "/" + std::to_string(db) : "");
}

std::string redact_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  const std::size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const auto at = url.rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(url);
  const auto colon = url.substr(start, at - start).find(':');
  const std::size_t secret_start = colon == std::string_view::npos ? start : start + colon + 1;
  return std::string(url.substr(0, secret_start)) + "***" + std::string(url.substr(at));
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
  auto read_port = [&](std::string_view text) {
    const auto port = parse_int(text, 1, 65535);
    if (!port) bad_url(url, "the port must be a number in 1..65535");
    endpoint.port = static_cast<int>(*port);
  };
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) bad_url(url, "an IPv6 address needs its closing ']'");
    const std::string_view after = rest.substr(close + 1);
    rest = rest.substr(1, close - 1);
    if (!after.empty()) {
      if (after.front() != ':') bad_url(url, "only ':port' may follow the ']' of an IPv6 address");
      read_port(after.substr(1));
    }
  } else {
    if (rest.find(':') != rest.rfind(':')) bad_url(url, "an IPv6 address goes in brackets: redis://[::1]:6379");
    if (const auto colon = rest.rfind(':'); colon != std::string_view::npos) {
      read_port(rest.substr(colon + 1));
      rest = rest.substr(0, colon);
    }
  }
  if (rest.empty()) bad_url(url, "no host");
  if (rest.find_first_of("[]") != std::string_view::npos) bad_url(url, "'[' or ']' outside an IPv6 address");
  endpoint.host = std::string(rest);
  return endpoint;
}

RemoteCacheConfig RemoteCacheConfig::from_env() { return from_config(current_config()); }

RemoteCacheConfig RemoteCacheConfig::from_config(const Config& settings) {
  RemoteCacheConfig config;
  config.connect_timeout = settings.remote_cache_connect_timeout;
  config.command_timeout = settings.remote_cache_timeout;
  config.lease = settings.remote_cache_lease;
  config.wait = settings.remote_cache_wait;
  config.retry = settings.remote_cache_retry;
  const auto& url = settings.remote_cache;
  if (!url) return config;
  config.requested = true;
  try {
    RedisEndpoint endpoint = parse_redis_url(*url);
    // Why kept when empty: a variable set but empty must be an error (the operator asked for
    // signing and named no file), not "unsigned entries".
    if (const auto& key_file = settings.remote_cache_key_file) {
      config.secret = read_fleet_key_file(*key_file);
      config.key_file = *key_file;
    }
    config.endpoint = std::move(endpoint);
  } catch (const std::exception& e) {
    config.secret.clear();
    config.key_file.clear();
    config.disabled_reason = e.what();
  }
  return config;
}

}  // namespace kiln

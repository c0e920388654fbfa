// RemoteCacheConfig::from_env and the pieces it parses: the Redis URL and the signing key file.
#include "cache/remote/remote_config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "base/env.hpp"
#include "base/log.hpp"
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

std::string read_secret_file(const std::string& path) {
  auto fail = [&](const std::string& why) -> std::string {
    throw_error("KILN_REMOTE_CACHE_KEY_FILE '" + path + "': " + why);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat info {};
  std::string secret;
  std::string problem;
  if (::fstat(fd, &info) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(info.st_mode)) {
    problem = "not a regular file";
  } else if (info.st_uid != ::geteuid()) {
    problem = "owned by uid " + std::to_string(info.st_uid) + ", not by this user";
  } else if ((info.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    problem = std::string("mode ") + mode + ": group or others may read it (expected 0600 or 0400)";
  } else if (info.st_size > (1 << 20)) {
    problem = "larger than 1 MiB";
  } else {
    secret.resize(static_cast<std::size_t>(info.st_size));
    std::size_t got = 0;
    while (got < secret.size()) {
      const ssize_t n = ::read(fd, secret.data() + got, secret.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        problem = n < 0 ? std::strerror(errno) : "shorter than its size";
        break;
      }
      got += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  if (!problem.empty()) return fail(problem);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < 16) return fail("the secret has " + std::to_string(secret.size()) + " bytes, expected at least 16");
  return secret;
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
    if (const auto key_file = env_value("KILN_REMOTE_CACHE_KEY_FILE")) config.secret = read_secret_file(*key_file);
    config.endpoint = parse_redis_url(*url);
  } catch (const std::exception& e) {
    config.disabled_reason = e.what();
  }
  return config;
}

}  // namespace kiln

// The remote tier's settings: Redis URLs (accepted forms, and errors that name what is wrong) and
// the signing key file's checks (owner, mode, size), without a server.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cache/fleet_signing.hpp"
#include "cache/remote/remote_config.hpp"
#include "kiln/error.hpp"

using namespace kiln;

namespace {

/// The error parse_redis_url gives for `url`; fails the test case when it accepts it.
std::string refusal_of(const char* url) {
  try {
    parse_redis_url(url);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("accepted");
  return {};
}

}  // namespace

TEST_CASE("parse_redis_url reads host, port, credentials, database and unix sockets") {
  auto plain = parse_redis_url("redis://cache.internal:6380");
  CHECK(plain.host == "cache.internal");
  CHECK(plain.port == 6380);
  CHECK(plain.password.empty());
  CHECK(plain.db == 0);
  CHECK(parse_redis_url("redis://10.0.0.1").port == 6379);

  auto full = parse_redis_url("redis://kiln:p%40ss%3Aword@10.0.0.1:7000/3");
  CHECK(full.user == "kiln");
  CHECK(full.password == "p@ss:word");
  CHECK(full.host == "10.0.0.1");
  CHECK(full.port == 7000);
  CHECK(full.db == 3);
  CHECK(full.display() == "redis://kiln:***@10.0.0.1:7000/3");  // never the password

  auto requirepass = parse_redis_url("redis://:secret@h:1");
  CHECK(requirepass.user.empty());
  CHECK(requirepass.password == "secret");

  auto unix_socket = parse_redis_url("unix:///run/redis/redis.sock");
  CHECK(unix_socket.socket_path == "/run/redis/redis.sock");
  CHECK(unix_socket.display() == "unix:///run/redis/redis.sock");
}

TEST_CASE("parse_redis_url refuses bad URLs, naming the variable and the accepted form") {
  for (const char* bad : {"http://h:1", "redis://", "redis://h:0", "redis://h:65536", "redis://h:port",
                          "redis://h:1/x", "redis://user:@h:1", "redis://a:%zz@h:1", "redis://a:%4@h:1",
                          "unix://relative.sock", "unix://"}) {
    INFO(bad);
    const std::string what = refusal_of(bad);
    CHECK(what.find("KILN_REMOTE_CACHE") != std::string::npos);
    CHECK(what.find("redis://[user:password@]host") != std::string::npos);
    CHECK(what.find(redact_url(bad)) != std::string::npos);  // the URL, its password replaced
  }
  CHECK(redact_url("redis://user:@h:1") == "redis://user:***@h:1");
  CHECK(redact_url("redis://a:%zz@h:1") == "redis://a:***@h:1");
  CHECK(redact_url("redis://secret@h:1") == "redis://***@h:1");
  CHECK(redact_url("redis://h:1/x") == "redis://h:1/x");
}

namespace {

std::string write_file(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = "remote_config_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

std::string secret_error(const std::string& path) {
  try {
    read_fleet_key_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("read_fleet_key_file takes a private file of at least 16 bytes and drops the newline") {
  const auto good = write_file("good", "0123456789abcdef0123\n", 0600);
  CHECK(read_fleet_key_file(good) == "0123456789abcdef0123");
  const auto read_only = write_file("ro", "0123456789abcdef", 0400);
  CHECK(read_fleet_key_file(read_only) == "0123456789abcdef");

  const auto loose = write_file("loose", "0123456789abcdef0123\n", 0644);
  CHECK(secret_error(loose).find("mode 0644") != std::string::npos);
  CHECK(secret_error(loose).find(loose) != std::string::npos);
  const auto group = write_file("group", "0123456789abcdef0123\n", 0640);
  CHECK(secret_error(group).find("mode 0640") != std::string::npos);
  const auto short_secret = write_file("short", "abc\n", 0600);
  CHECK(secret_error(short_secret).find("at least 16") != std::string::npos);
  CHECK(secret_error("does-not-exist").find("No such file") != std::string::npos);
  CHECK(secret_error(".").find("not a regular file") != std::string::npos);
  for (const auto& path : {good, read_only, loose, group, short_secret}) std::remove(path.c_str());
}

TEST_CASE("from_env: no URL, no tier; a bad URL or key file turns the tier off with the reason") {
  ::unsetenv("KILN_REMOTE_CACHE");
  ::unsetenv("KILN_REMOTE_CACHE_KEY_FILE");
  auto off = RemoteCacheConfig::from_env();
  CHECK_FALSE(off.endpoint);
  CHECK(off.disabled_reason.empty());

  ::setenv("KILN_REMOTE_CACHE", "redis://127.0.0.1:6390", 1);
  ::setenv("KILN_REMOTE_CACHE_TIMEOUT_MS", "250", 1);
  ::setenv("KILN_REMOTE_CACHE_LEASE_MS", "-5", 1);
  auto on = RemoteCacheConfig::from_env();
  REQUIRE(on.endpoint);
  CHECK(on.endpoint->port == 6390);
  CHECK(on.command_timeout.count() == 250);
  CHECK(on.lease.count() == 10000);  // a bad number: the default, with a warning
  CHECK(on.secret.empty());

  const auto loose = write_file("env_loose", "0123456789abcdef0123\n", 0644);
  ::setenv("KILN_REMOTE_CACHE_KEY_FILE", loose.c_str(), 1);
  auto refused = RemoteCacheConfig::from_env();
  CHECK_FALSE(refused.endpoint);  // never on without the signing asked for
  CHECK(refused.disabled_reason.find("mode 0644") != std::string::npos);

  ::setenv("KILN_REMOTE_CACHE", "redis//oops", 1);
  ::unsetenv("KILN_REMOTE_CACHE_KEY_FILE");
  auto bad = RemoteCacheConfig::from_env();
  CHECK_FALSE(bad.endpoint);
  CHECK(bad.disabled_reason.find("redis//oops") != std::string::npos);
  for (const char* name : {"KILN_REMOTE_CACHE", "KILN_REMOTE_CACHE_TIMEOUT_MS", "KILN_REMOTE_CACHE_LEASE_MS"})
    ::unsetenv(name);
  std::remove(loose.c_str());
}

TEST_CASE("parse_redis_url never shows the password in its errors, whatever is wrong") {
  // Each URL is refused; the error names the problem and the URL with its password replaced.
  for (const char* bad : {"redis://:SuperSecret123@127.0.0.1:6396/", "redis://kiln:SuperSecret123@h:port",
                          "redis://SuperSecret123@h:1/x", "redis://:SuperSecret123%zz@h:1",
                          "rediss://:SuperSecret123@h:1", "redis://:Super@Secret123@h:99999",
                          "redis//:SuperSecret123@h", "redis://:SuperSecret123@[::1:6379"}) {
    INFO(bad);
    const std::string what = refusal_of(bad);
    CHECK(what.find("SuperSecret123") == std::string::npos);
    CHECK(what.find("Secret123") == std::string::npos);
    CHECK(what.find("***") != std::string::npos);
    CHECK(what.find("KILN_REMOTE_CACHE") != std::string::npos);
  }
}

TEST_CASE("parse_redis_url takes a bracketed IPv6 address") {
  const auto with_port = parse_redis_url("redis://[::1]:6399/0");
  CHECK(with_port.host == "::1");
  CHECK(with_port.port == 6399);
  CHECK(with_port.db == 0);
  CHECK(with_port.display() == "redis://[::1]:6399");
  const auto default_port = parse_redis_url("redis://:pw@[2001:db8::7]/2");
  CHECK(default_port.host == "2001:db8::7");
  CHECK(default_port.port == 6379);
  CHECK(default_port.db == 2);
  CHECK(default_port.display() == "redis://:***@[2001:db8::7]:6379/2");
  for (const char* bad : {"redis://[::1", "redis://[::1]x", "redis://[::1]:", "redis://[]:1", "redis://::1:6379"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_redis_url(bad), Error);
  }
}

TEST_CASE("from_env: a set but empty key-file variable is an error, not 'unsigned'") {
  ::setenv("KILN_REMOTE_CACHE", "redis://127.0.0.1:6390", 1);
  ::setenv("KILN_REMOTE_CACHE_KEY_FILE", "", 1);
  auto empty = RemoteCacheConfig::from_env();
  CHECK_FALSE(empty.endpoint);
  CHECK(empty.disabled_reason.find("KILN_REMOTE_CACHE_KEY_FILE") != std::string::npos);
  CHECK(empty.disabled_reason.find("empty") != std::string::npos);

  // Key files that must turn the tier off: missing, empty, short, group- or world-readable.
  const auto empty_file = write_file("env_empty", "", 0600);
  const auto short_file = write_file("env_short", "0123456789\n", 0600);
  const auto group_file = write_file("env_group", "0123456789abcdef0123\n", 0640);
  const auto world_file = write_file("env_world", "0123456789abcdef0123\n", 0604);
  for (const std::string& path : {std::string("no-such-key-file"), empty_file, short_file, group_file, world_file}) {
    INFO(path);
    ::setenv("KILN_REMOTE_CACHE_KEY_FILE", path.c_str(), 1);
    auto refused = RemoteCacheConfig::from_env();
    CHECK_FALSE(refused.endpoint);
    CHECK(refused.disabled_reason.find(path) != std::string::npos);
  }
  if (::geteuid() == 0) {
    // Only root can give a file to another owner; as anyone else, the owner check is covered by
    // read_fleet_key_file's own rule (st_uid == geteuid) and this part is skipped.
    const auto foreign = write_file("env_foreign", "0123456789abcdef0123\n", 0600);
    REQUIRE(::chown(foreign.c_str(), 65534, 65534) == 0);
    ::setenv("KILN_REMOTE_CACHE_KEY_FILE", foreign.c_str(), 1);
    auto refused = RemoteCacheConfig::from_env();
    CHECK_FALSE(refused.endpoint);
    CHECK(refused.disabled_reason.find("owned by uid 65534") != std::string::npos);
    std::remove(foreign.c_str());
  }
  for (const auto& path : {empty_file, short_file, group_file, world_file}) std::remove(path.c_str());
  ::unsetenv("KILN_REMOTE_CACHE");
  ::unsetenv("KILN_REMOTE_CACHE_KEY_FILE");
}

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "base/config.hpp"

using namespace kiln;

namespace {

using Environment = std::map<std::string, std::string>;

// Why a lookup of our own: the process environment stays untouched, so the cases need no cleanup
// and may run in any order.
Config config_of(const Environment& environment) {
  return Config::from_environment([&environment](const char* name) -> const char* {
    const auto found = environment.find(name);
    return found == environment.end() ? nullptr : found->second.c_str();
  });
}

std::string all_warnings(const Config& config) {
  std::string out;
  for (const auto& warning : config.warnings) out += warning + "\n";
  return out;
}

}  // namespace

TEST_CASE("config: an empty environment gives every default and no warning") {
  const Config config = config_of({});
  CHECK(config.warnings.empty());
  CHECK(config.log_level == "warn");
  CHECK(config.jit);
  CHECK_FALSE(config.arch);
  CHECK_FALSE(config.lineinfo);
  CHECK_FALSE(config.dump_dir);
  CHECK_FALSE(config.nvrtc_library);
  CHECK(config.cache);
  CHECK_FALSE(config.cache_dir);
  CHECK_FALSE(config.cache_path);
  CHECK(config.cache_max_bytes == (std::uint64_t{1} << 30));
  CHECK_FALSE(config.remote_cache);
  CHECK_FALSE(config.remote_cache_key_file);
  CHECK(config.remote_cache_connect_timeout.count() == 100);
  CHECK(config.remote_cache_timeout.count() == 500);
  CHECK(config.remote_cache_lease.count() == 10000);
  CHECK(config.remote_cache_wait.count() == 15000);
  CHECK(config.remote_cache_retry.count() == 2000);
  CHECK(config.fp8_act_quant_hopper);
  CHECK(config.q_one_group);
  CHECK_FALSE(config.pdl);
  CHECK(config.prefetch);
  CHECK_FALSE(config.home);
  CHECK_FALSE(config.ld_library_path);
}

TEST_CASE("config: a directly built Config holds the same defaults as an empty environment") {
  const Config built;
  const Config read = config_of({});
  CHECK(built.cache_max_bytes == read.cache_max_bytes);
  CHECK(built.remote_cache_lease == read.remote_cache_lease);
  CHECK(built.pdl == read.pdl);
  CHECK(built.log_level == read.log_level);
}

TEST_CASE("config: each switch takes the switch words and warns once, keeping its default, on anything else") {
  struct Switch {
    const char* name;
    bool Config::*field;
    bool fallback;
  };
  const Switch switches[] = {
      {"KILN_JIT", &Config::jit, true},
      {"KILN_LINEINFO", &Config::lineinfo, false},
      {"KILN_CACHE", &Config::cache, true},
      {"KILN_FP8_ACT_QUANT_HOPPER", &Config::fp8_act_quant_hopper, true},
      {"KILN_Q_ONE_GROUP", &Config::q_one_group, true},
      {"KILN_PDL", &Config::pdl, false},
      {"KILN_PREFETCH", &Config::prefetch, true},
  };
  for (const auto& lever : switches) {
    CAPTURE(lever.name);
    for (const char* on : {"1", "true", "ON", "yes"}) CHECK(config_of({{lever.name, on}}).*lever.field);
    for (const char* off : {"0", "false", "Off", "no"}) CHECK_FALSE(config_of({{lever.name, off}}).*lever.field);
    CHECK(config_of({{lever.name, ""}}).*lever.field == lever.fallback);  // empty is unset
    CHECK(config_of({{lever.name, ""}}).warnings.empty());
    const Config bad = config_of({{lever.name, "maybe"}});
    CHECK(bad.*lever.field == lever.fallback);
    REQUIRE(bad.warnings.size() == 1);
    CHECK(bad.warnings[0] == std::string(lever.name) +
                                 "='maybe' is not a switch (expected 1/0, true/false, on/off, yes/no); using " +
                                 (lever.fallback ? "1" : "0"));
  }
}

TEST_CASE("config: KILN_CACHE_MAX_BYTES takes a size above zero") {
  CHECK(config_of({{"KILN_CACHE_MAX_BYTES", "64M"}}).cache_max_bytes == (std::uint64_t{64} << 20));
  CHECK(config_of({{"KILN_CACHE_MAX_BYTES", "1"}}).cache_max_bytes == 1);
  for (const char* bad : {"0", "lots", "-1", "1.5G", "18446744073709551616"}) {
    CAPTURE(bad);
    const Config config = config_of({{"KILN_CACHE_MAX_BYTES", bad}});
    CHECK(config.cache_max_bytes == (std::uint64_t{1} << 30));
    REQUIRE(config.warnings.size() == 1);
    CHECK(config.warnings[0] == "KILN_CACHE_MAX_BYTES='" + std::string(bad) +
                                    "' is not a size above zero (bytes, or with K, M, G, T); using 1073741824");
  }
}

TEST_CASE("config: the remote cache's times take milliseconds in 1..3600000") {
  struct Time {
    const char* name;
    std::chrono::milliseconds Config::*field;
    long fallback;
  };
  const Time times[] = {
      {"KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS", &Config::remote_cache_connect_timeout, 100},
      {"KILN_REMOTE_CACHE_TIMEOUT_MS", &Config::remote_cache_timeout, 500},
      {"KILN_REMOTE_CACHE_LEASE_MS", &Config::remote_cache_lease, 10000},
      {"KILN_REMOTE_CACHE_WAIT_MS", &Config::remote_cache_wait, 15000},
      {"KILN_REMOTE_CACHE_RETRY_MS", &Config::remote_cache_retry, 2000},
  };
  for (const auto& time : times) {
    CAPTURE(time.name);
    CHECK((config_of({{time.name, "1"}}).*time.field).count() == 1);
    CHECK((config_of({{time.name, "3600000"}}).*time.field).count() == 3600000);
    for (const char* bad : {"0", "3600001", "-5", "1s", "0000000001", " 250"}) {
      CAPTURE(bad);
      const Config config = config_of({{time.name, bad}});
      CHECK((config.*time.field).count() == time.fallback);
      REQUIRE(config.warnings.size() == 1);
      CHECK(config.warnings[0] == std::string(time.name) + "='" + bad +
                                      "' is not a number of milliseconds in 1..3600000; using " +
                                      std::to_string(time.fallback));
    }
  }
}

TEST_CASE("config: KILN_LOG_LEVEL takes spdlog's level names; anything else, empty included, warns") {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    CAPTURE(level);
    const Config config = config_of({{"KILN_LOG_LEVEL", level}});
    CHECK(config.log_level == level);
    CHECK(config.warnings.empty());
  }
  for (const char* bad : {"", "loud", "WARN"}) {
    CAPTURE(bad);
    const Config config = config_of({{"KILN_LOG_LEVEL", bad}});
    CHECK(config.log_level == "warn");
    REQUIRE(config.warnings.size() == 1);
    CHECK(config.warnings[0] == "KILN_LOG_LEVEL='" + std::string(bad) +
                                    "' is not a level (trace, debug, info, warn, error, critical, off); using warn");
  }
}

TEST_CASE("config: text settings are kept as given; empty counts as unset but for the key file") {
  const Config config = config_of({{"KILN_ARCH", "garbage"},  // checked where NVRTC's arch list is known
                                   {"KILN_DUMP_DIR", "/tmp/dump"},
                                   {"KILN_NVRTC_LIBRARY", "/opt/libnvrtc.so"},
                                   {"KILN_CACHE_DIR", "relative"},
                                   {"KILN_CACHE_PATH", "/a.kpack:/b"},
                                   {"KILN_REMOTE_CACHE", "redis://:secret@host"},
                                   {"HOME", "/home/someone"},
                                   {"XDG_CACHE_HOME", "/xdg"},
                                   {"LD_LIBRARY_PATH", "/lib1:/lib2"},
                                   {"VIRTUAL_ENV", "/venv"},
                                   {"CONDA_PREFIX", "/conda"}});
  CHECK(config.warnings.empty());
  CHECK(config.arch == std::optional<std::string>("garbage"));
  CHECK(config.dump_dir == std::optional<std::string>("/tmp/dump"));
  CHECK(config.nvrtc_library == std::optional<std::string>("/opt/libnvrtc.so"));
  CHECK(config.cache_dir == std::optional<std::string>("relative"));
  CHECK(config.cache_path == std::optional<std::string>("/a.kpack:/b"));
  CHECK(config.remote_cache == std::optional<std::string>("redis://:secret@host"));
  CHECK(config.home == std::optional<std::string>("/home/someone"));
  CHECK(config.xdg_cache_home == std::optional<std::string>("/xdg"));
  CHECK(config.ld_library_path == std::optional<std::string>("/lib1:/lib2"));
  CHECK(config.virtual_env == std::optional<std::string>("/venv"));
  CHECK(config.conda_prefix == std::optional<std::string>("/conda"));

  for (const char* name : {"KILN_ARCH", "KILN_DUMP_DIR", "KILN_CACHE_DIR", "KILN_REMOTE_CACHE", "HOME"}) {
    CAPTURE(name);
    const Config empty = config_of({{name, ""}});
    CHECK_FALSE(empty.arch);
    CHECK_FALSE(empty.dump_dir);
    CHECK_FALSE(empty.cache_dir);
    CHECK_FALSE(empty.remote_cache);
    CHECK_FALSE(empty.home);
  }
  // Why kept: set but empty is an error where the key is read, never "unsigned entries".
  CHECK(config_of({{"KILN_REMOTE_CACHE_KEY_FILE", ""}}).remote_cache_key_file == std::optional<std::string>(""));
  CHECK(config_of({{"KILN_REMOTE_CACHE_KEY_FILE", "/k"}}).remote_cache_key_file == std::optional<std::string>("/k"));
}

TEST_CASE("config: several bad values give one warning each, in the order read") {
  const Config config = config_of({{"KILN_PDL", "x"}, {"KILN_JIT", "y"}, {"KILN_CACHE_MAX_BYTES", "z"}});
  CHECK_FALSE(config.pdl);
  CHECK(config.jit);
  REQUIRE(config.warnings.size() == 3);
  INFO(all_warnings(config));
  CHECK(config.warnings[0].rfind("KILN_JIT='y'", 0) == 0);
  CHECK(config.warnings[1].rfind("KILN_CACHE_MAX_BYTES='z'", 0) == 0);
  CHECK(config.warnings[2].rfind("KILN_PDL='x'", 0) == 0);
}

// The one place kiln reads the environment (docs/configuration.md); a grep for the C library's
// lookup over src/ finds this file alone.
#include "base/config.hpp"

#include <spdlog/common.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <string_view>
#include <utility>

#include "base/env.hpp"
#include "base/log.hpp"

namespace kiln {

namespace {

std::optional<long> parse_ms(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > 3600000) return std::nullopt;
  return value;
}

// Why its readers carry the names of the old free functions: tests/docs/test_docs_coverage.py finds
// the variables kiln reads by those names, each called with the variable's literal name.
class Reader {
 public:
  Reader(const Config::Lookup& lookup, std::vector<std::string>& warnings) : lookup_(lookup), warnings_(warnings) {}

  /// The raw value, null when unset; empty is a value.
  const char* getenv(const char* name) const { return lookup_ ? lookup_(name) : std::getenv(name); }

  /// An empty value counts as unset, for every variable but the two whose emptiness means something.
  std::optional<std::string> env_value(const char* name) const {
    const char* value = getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  }

  bool switch_lever(const char* name, bool fallback) const {
    const auto text = env_value(name);
    if (!text) return fallback;
    if (const auto parsed = parse_switch(*text)) return *parsed;
    warn(name, *text, std::string("is not a switch (expected 1/0, true/false, on/off, yes/no); using ") +
                          (fallback ? "1" : "0"));
    return fallback;
  }

  std::chrono::milliseconds ms_from_env(const char* name, std::chrono::milliseconds fallback) const {
    const auto text = env_value(name);
    if (!text) return fallback;
    if (const auto parsed = parse_ms(*text)) return std::chrono::milliseconds(*parsed);
    warn(name, *text, "is not a number of milliseconds in 1..3600000; using " + std::to_string(fallback.count()));
    return fallback;
  }

  std::uint64_t size_or(const char* name, const std::string& text, std::uint64_t fallback) const {
    const auto parsed = parse_size(text);
    if (parsed && *parsed > 0) return *parsed;
    warn(name, text, "is not a size above zero (bytes, or with K, M, G, T); using " + std::to_string(fallback));
    return fallback;
  }

  std::string level_or(const char* name, const std::string& text, const std::string& fallback) const {
    // Why: from_str maps unknown names to "off", which would hide the warning about them.
    if (spdlog::level::from_str(text) != spdlog::level::off || text == "off") return text;
    warn(name, text, "is not a level (trace, debug, info, warn, error, critical, off); using " + fallback);
    return fallback;
  }

 private:
  void warn(const char* name, const std::string& text, const std::string& why) const {
    warnings_.push_back(std::string(name) + "='" + text + "' " + why);
  }

  const Config::Lookup& lookup_;
  std::vector<std::string>& warnings_;
};

// Why remembered: current_config and switch_lever read on every use, and one bad value is still
// one warning.
bool first_time(const std::string& warning) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  const std::lock_guard<std::mutex> lock(mutex);
  return warned.insert(warning).second;
}

}  // namespace

Config Config::from_environment(const Lookup& lookup) {
  Config config;
  const Reader env(lookup, config.warnings);
  // Why the raw value: set but empty is "not a level", as it always has been.
  if (const char* level = env.getenv("KILN_LOG_LEVEL"))
    config.log_level = env.level_or("KILN_LOG_LEVEL", level, config.log_level);
  config.jit = env.switch_lever("KILN_JIT", config.jit);
  config.arch = env.env_value("KILN_ARCH");
  config.lineinfo = env.switch_lever("KILN_LINEINFO", config.lineinfo);
  config.dump_dir = env.env_value("KILN_DUMP_DIR");
  config.nvrtc_library = env.env_value("KILN_NVRTC_LIBRARY");
  config.cache = env.switch_lever("KILN_CACHE", config.cache);
  config.cache_dir = env.env_value("KILN_CACHE_DIR");
  config.cache_path = env.env_value("KILN_CACHE_PATH");
  if (const auto size = env.env_value("KILN_CACHE_MAX_BYTES"))
    config.cache_max_bytes = env.size_or("KILN_CACHE_MAX_BYTES", *size, config.cache_max_bytes);
  config.remote_cache = env.env_value("KILN_REMOTE_CACHE");
  // Why the raw value: a key file variable set but empty is an error where it is used (the operator
  // asked for signing and named no file), not "unsigned entries".
  if (const char* key_file = env.getenv("KILN_REMOTE_CACHE_KEY_FILE")) config.remote_cache_key_file = key_file;
  config.remote_cache_connect_timeout =
      env.ms_from_env("KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS", config.remote_cache_connect_timeout);
  config.remote_cache_timeout = env.ms_from_env("KILN_REMOTE_CACHE_TIMEOUT_MS", config.remote_cache_timeout);
  config.remote_cache_lease = env.ms_from_env("KILN_REMOTE_CACHE_LEASE_MS", config.remote_cache_lease);
  config.remote_cache_wait = env.ms_from_env("KILN_REMOTE_CACHE_WAIT_MS", config.remote_cache_wait);
  config.remote_cache_retry = env.ms_from_env("KILN_REMOTE_CACHE_RETRY_MS", config.remote_cache_retry);
  config.fp8_act_quant_hopper = env.switch_lever("KILN_FP8_ACT_QUANT_HOPPER", config.fp8_act_quant_hopper);
  config.q_one_group = env.switch_lever("KILN_Q_ONE_GROUP", config.q_one_group);
  config.pdl = env.switch_lever("KILN_PDL", config.pdl);
  config.prefetch = env.switch_lever("KILN_PREFETCH", config.prefetch);
  config.home = env.env_value("HOME");
  config.xdg_cache_home = env.env_value("XDG_CACHE_HOME");
  config.ld_library_path = env.env_value("LD_LIBRARY_PATH");
  config.virtual_env = env.env_value("VIRTUAL_ENV");
  config.conda_prefix = env.env_value("CONDA_PREFIX");
  return config;
}

const Config& process_config_unlogged() {
  static const Config config = Config::from_environment();
  return config;
}

const Config& process_config() {
  logger();  // Why: the logger logs the process configuration's warnings when it is made
  return process_config_unlogged();
}

Config current_config() {
  Config config = Config::from_environment();
  for (const auto& warning : config.warnings)
    if (!warned_about(warning) && first_time(warning)) logger().warn("{}", warning);
  return config;
}

bool switch_lever(const char* name, bool fallback) {
  std::vector<std::string> warnings;
  const bool value = Reader({}, warnings).switch_lever(name, fallback);
  for (const auto& warning : warnings)
    if (first_time(warning)) logger().warn("{}", warning);
  return value;
}

}  // namespace kiln

#pragma once
/// @file
/// Every environment variable kiln reads, read in one place into one value (docs/configuration.md).
/// A bad value gives the variable's default and one warning; tests build a Config directly, or
/// through from_environment with a lookup of their own, instead of setting the environment.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct Config {
  // Logging and compilation.
  std::string log_level = "warn";             ///< KILN_LOG_LEVEL: a name spdlog::level::from_str takes
  bool jit = true;                            ///< KILN_JIT
  std::optional<std::string> arch;            ///< KILN_ARCH as given; checked where the arch list is known
  bool lineinfo = false;                      ///< KILN_LINEINFO
  std::optional<std::string> dump_dir;        ///< KILN_DUMP_DIR
  std::optional<std::string> nvrtc_library;   ///< KILN_NVRTC_LIBRARY

  // Caches (docs/caching.md).
  bool cache = true;                          ///< KILN_CACHE
  std::optional<std::string> cache_dir;       ///< KILN_CACHE_DIR
  std::optional<std::string> cache_path;      ///< KILN_CACHE_PATH
  std::uint64_t cache_max_bytes = std::uint64_t{1} << 30;  ///< KILN_CACHE_MAX_BYTES
  std::optional<std::string> remote_cache;    ///< KILN_REMOTE_CACHE (may hold a password)
  /// KILN_REMOTE_CACHE_KEY_FILE; unlike the others, set but empty is kept as "" (an error where used).
  std::optional<std::string> remote_cache_key_file;
  std::chrono::milliseconds remote_cache_connect_timeout{100};  ///< KILN_REMOTE_CACHE_CONNECT_TIMEOUT_MS
  std::chrono::milliseconds remote_cache_timeout{500};          ///< KILN_REMOTE_CACHE_TIMEOUT_MS
  std::chrono::milliseconds remote_cache_lease{10000};          ///< KILN_REMOTE_CACHE_LEASE_MS
  std::chrono::milliseconds remote_cache_wait{15000};           ///< KILN_REMOTE_CACHE_WAIT_MS
  std::chrono::milliseconds remote_cache_retry{2000};           ///< KILN_REMOTE_CACHE_RETRY_MS

  // Op levers (docs/ops.md).
  bool fp8_act_quant_hopper = true;           ///< KILN_FP8_ACT_QUANT_HOPPER
  bool q_one_group = true;                    ///< KILN_Q_ONE_GROUP
  bool pdl = false;                           ///< KILN_PDL
  bool prefetch = true;                       ///< KILN_PREFETCH (docs/caching.md)

  // Variables of the system, not kiln's: where the default cache folder and NVRTC are looked for.
  std::optional<std::string> home;             ///< HOME
  std::optional<std::string> xdg_cache_home;   ///< XDG_CACHE_HOME
  std::optional<std::string> ld_library_path;  ///< LD_LIBRARY_PATH
  std::optional<std::string> virtual_env;      ///< VIRTUAL_ENV
  std::optional<std::string> conda_prefix;     ///< CONDA_PREFIX

  /// One line per bad value, in the order read, each naming the variable, the value, what is
  /// accepted and the default used instead. Logged by process_config and current_config.
  std::vector<std::string> warnings;

  /// The value of a variable, or null when unset (as the C library's lookup answers).
  using Lookup = std::function<const char*(const char* name)>;
  /// Reads each variable once through `lookup` (the process environment when empty); logs nothing.
  static Config from_environment(const Lookup& lookup = {});
};

/// The process's configuration: the environment read once, on first use (thread-safe), its
/// warnings logged once.
const Config& process_config();

/// The environment read again now, its warnings logged once each per process. For the settings a
/// process (tests, `kiln` subcommands) may change between calls: KILN_ARCH, KILN_JIT,
/// KILN_LINEINFO, KILN_DUMP_DIR, the disk and remote cache settings and the folders behind them.
Config current_config();

/// process_config without logging its warnings: for the logger itself, which those warnings go to.
const Config& process_config_unlogged();

}  // namespace kiln

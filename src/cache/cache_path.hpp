#pragma once
/// @file
/// The layered cache path: `KILN_CACHE_PATH=/opt/model/kernels.kpack:/opt/model/kiln:/var/cache/kiln`,
/// bundles and folders searched in order. The first folder kiln can write (it exists, or can be
/// created, owned by this user and writable) is the writable disk cache; every other folder, and
/// every bundle, is a read-only layer, read and never written, and a read-only folder is not worth
/// a warning. Without a writable folder in the path, `KILN_CACHE_DIR` (when set) is the writable
/// one; otherwise compiled kernels stay in memory. Without `KILN_CACHE_PATH`, the single folder of
/// DiskCacheConfig::from_env, as before.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_layer.hpp"
#include "cache/disk/disk_cache.hpp"

namespace kiln {

struct Config;

namespace bundle {
struct SigningKey;
}

struct CachePath {
  std::string spec;                                  ///< KILN_CACHE_PATH as given; empty when unset
  std::vector<std::shared_ptr<CacheLayer>> layers;   ///< read-only layers, in path order
  std::optional<std::size_t> writable_at;            ///< the writable folder's place among the path's elements
  std::vector<std::string> elements;                 ///< the path's elements, in order
  DiskCacheConfig writable;                          ///< the disk cache's configuration
  std::string key_error;                             ///< a signing key that could not be read (bundles refused)
};

/// Builds the path from `spec` (KILN_CACHE_PATH's value; empty elements are skipped), with
/// `fallback` (DiskCacheConfig::from_env) as the writable folder when the path holds none, keeping
/// its bound. A bundle is an element that is a regular file or ends in `.kpack`. Bundles are checked
/// with `key` when given (signed bundles only); with a `key_error` (a configured key file that
/// cannot be used) no bundle is used. `fallback_is_explicit`: KILN_CACHE_DIR is set (kept as the
/// writable folder when the path has none; the default folder is not). Without `disk_enabled`
/// (KILN_CACHE=0) every folder is a read-only layer.
CachePath make_cache_path(const std::string& spec, const DiskCacheConfig& fallback, const bundle::SigningKey* key,
                          const std::string& key_error, bool fallback_is_explicit, bool disk_enabled = true);

/// The cache path `config` describes (KILN_CACHE_PATH, KILN_CACHE_DIR, KILN_CACHE and the folders
/// behind them, KILN_REMOTE_CACHE_KEY_FILE for bundles); a key file that cannot be used is logged.
CachePath cache_path_for(const Config& config);

/// cache_path_for the environment on first use (thread-safe, kept for the process).
const CachePath& process_cache_path();

}  // namespace kiln

#include "cache/cache_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/config.hpp"
#include "base/env.hpp"
#include "base/log.hpp"
#include "cache/bundle/bundle_file.hpp"
#include "cache/bundle/bundle_signature.hpp"
#include "cache/disk/read_only_folder.hpp"
#include "kiln/error.hpp"

namespace kiln {

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Whether kiln may use `path` as its writable cache folder: one of ours that we can write, or one
/// we can create. Decided quietly; the DiskCache checks it again, fully, when it opens it.
bool writable_folder(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0)
    return S_ISDIR(info.st_mode) && info.st_uid == ::geteuid() && ::access(path.c_str(), W_OK) == 0;
  if (errno != ENOENT) return false;
  return ::mkdir(path.c_str(), 0700) == 0;
}

}  // namespace

CachePath make_cache_path(const std::string& spec, const DiskCacheConfig& fallback, const bundle::SigningKey* key,
                          const std::string& key_error, bool fallback_is_explicit, bool disk_enabled) {
  CachePath path;
  path.spec = spec;
  path.key_error = key_error;
  path.writable = fallback;
  if (spec.empty()) return path;
  path.elements = split_path_list(spec);
  for (std::size_t i = 0; i < path.elements.size(); ++i) {
    const std::string& element = path.elements[i];
    struct stat info {};
    const bool is_file = ::stat(element.c_str(), &info) == 0 && S_ISREG(info.st_mode);
    if (is_file || ends_with(element, ".kpack")) {
      // Why skipped with a bad key file: a configured key that cannot be read must not mean
      // "trust unsigned bundles".
      if (key_error.empty()) path.layers.push_back(std::make_shared<bundle::BundleFile>(element, key));
    } else if (!path.writable_at && disk_enabled && writable_folder(element)) {
      path.writable_at = i;
      path.writable.dir = element;
      path.writable.disabled_reason.clear();
    } else {
      path.layers.push_back(std::make_shared<ReadOnlyFolder>(element));
    }
  }
  if (!path.writable_at && !fallback_is_explicit && fallback.dir) {
    // Why no default folder: a path was given, so kiln writes where it says (or KILN_CACHE_DIR),
    // never into a $HOME that a read-only image may not even have.
    path.writable.dir.reset();
    path.writable.disabled_reason = "no writable folder in KILN_CACHE_PATH and no KILN_CACHE_DIR";
  }
  return path;
}

CachePath cache_path_for(const Config& config) {
  const auto& spec = config.cache_path;
  std::optional<bundle::SigningKey> key;
  std::string key_error;
  if (spec && config.remote_cache_key_file) {
    try {
      key = bundle::read_signing_key(*config.remote_cache_key_file);
    } catch (const Error& error) {
      key_error = error.what();
      // Why the check: the remote tier reads the same key file, and the reason is printed once.
      if (warned_about(key_error))
        logger().debug("{}; no bundle is used", key_error);
      else
        logger().warn("{}; no bundle is used", key_error);
    }
  }
  return make_cache_path(spec.value_or(""), DiskCacheConfig::from_config(config), key ? &*key : nullptr, key_error,
                         config.cache_dir.has_value(), config.cache);
}

const CachePath& process_cache_path() {
  // Why current_config and not process_config: the path is read at its first use, as tests and
  // `kiln` subcommands that set the variables first rely on.
  static const CachePath path = cache_path_for(current_config());
  return path;
}

}  // namespace kiln

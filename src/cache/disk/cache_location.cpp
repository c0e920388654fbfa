// DiskCacheConfig::from_env: where the disk cache lives and how large it may grow.
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/env.hpp"
#include "base/log.hpp"
#include "cache/disk/disk_cache.hpp"

namespace kiln {

namespace {

std::optional<std::string> passwd_home() {
  std::vector<char> buffer(16384);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr ||
      found->pw_dir == nullptr || found->pw_dir[0] == '\0')
    return std::nullopt;
  return std::string(found->pw_dir);
}

/// `path` (relative) joined to the working directory; nothing when that cannot be read.
std::optional<std::string> absolute_path(const std::string& path) {
  std::vector<char> buffer(4096);
  while (::getcwd(buffer.data(), buffer.size()) == nullptr) {
    if (errno != ERANGE || buffer.size() > (std::size_t{1} << 20)) return std::nullopt;
    buffer.resize(buffer.size() * 2);
  }
  std::string cwd(buffer.data());
  std::string rest = path;
  while (rest.rfind("./", 0) == 0) rest.erase(0, 2);
  if (rest == ".") rest.clear();
  return cwd == "/" ? "/" + rest : rest.empty() ? cwd : cwd + "/" + rest;
}

std::uint64_t max_bytes_from_env(std::uint64_t fallback) {
  const auto text = env_value("KILN_CACHE_MAX_BYTES");
  if (!text) return fallback;
  const auto parsed = parse_size(*text);
  if (parsed && *parsed > 0) return *parsed;
  logger().warn("KILN_CACHE_MAX_BYTES='{}' is not a size above zero (bytes, or with K, M, G, T); using {}", *text,
                fallback);
  return fallback;
}

}  // namespace

DiskCacheConfig DiskCacheConfig::from_env(std::optional<Version> nvrtc) {
  DiskCacheConfig config;
  config.nvrtc = nvrtc;
  config.max_bytes = max_bytes_from_env(config.max_bytes);
  if (!switch_lever("KILN_CACHE", true)) {
    config.disabled_reason = "KILN_CACHE=0";
    return config;
  }
  if (auto dir = env_value("KILN_CACHE_DIR")) {
    if (dir->front() == '/') {
      config.dir = std::move(dir);
    } else if (auto absolute = absolute_path(*dir)) {
      // Why absolute now: the folder must not move when the process changes its working directory,
      // and every report should name the folder a person can find.
      config.dir = std::move(absolute);
    } else {
      config.disabled_reason = "KILN_CACHE_DIR='" + *dir + "' is relative and the working directory is unknown (" +
                               std::strerror(errno) + "); give an absolute path";
    }
  } else if (auto xdg = env_value("XDG_CACHE_HOME"); xdg && xdg->front() == '/') {
    // Why: the XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    config.dir = *xdg + "/kiln";
  } else if (auto home = env_value("HOME")) {
    config.dir = *home + "/.cache/kiln";
  } else if (auto home_of_user = passwd_home()) {
    config.dir = *home_of_user + "/.cache/kiln";
  } else {
    config.disabled_reason = "no KILN_CACHE_DIR, XDG_CACHE_HOME or home folder";
  }
  return config;
}

}  // namespace kiln

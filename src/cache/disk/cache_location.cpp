// DiskCacheConfig::from_config: where the disk cache lives and how large it may grow.
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/config.hpp"
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

}  // namespace

DiskCacheConfig DiskCacheConfig::from_env(std::optional<Version> nvrtc) { return from_config(current_config(), nvrtc); }

DiskCacheConfig DiskCacheConfig::from_config(const Config& settings, std::optional<Version> nvrtc) {
  DiskCacheConfig config;
  config.nvrtc = nvrtc;
  config.max_bytes = settings.cache_max_bytes;
  if (!settings.cache) {
    config.disabled_reason = "KILN_CACHE=0";
    return config;
  }
  if (auto dir = settings.cache_dir) {
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
  } else if (const auto& xdg = settings.xdg_cache_home; xdg && xdg->front() == '/') {
    // Why: the XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    config.dir = *xdg + "/kiln";
  } else if (const auto& home = settings.home) {
    config.dir = *home + "/.cache/kiln";
  } else if (auto home_of_user = passwd_home()) {
    config.dir = *home_of_user + "/.cache/kiln";
  } else {
    config.disabled_reason = "no KILN_CACHE_DIR, XDG_CACHE_HOME or home folder";
  }
  return config;
}

}  // namespace kiln

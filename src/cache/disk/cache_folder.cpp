#include "cache_folder.hpp"

#include <cerrno>
#include <cstdio>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::detail {

namespace {

/// mkdir -p with mode 0700; errors are left to the open that follows, which reports them.
void make_folders(const std::string& dir) {
  for (std::size_t slash = dir.find('/', 1); ; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return;
    if (slash == std::string::npos) return;
  }
}

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

OpenedFolder open_cache_folder(const std::string& dir) {
  OpenedFolder folder;
  if (dir.empty()) {
    folder.reason = "the cache folder name is empty";
    return folder;
  }
  make_folders(dir);
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    folder.reason = "cannot open '" + dir + "' as a folder: " + errno_text(errno);
    return folder;
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    folder.reason = "cannot stat '" + dir + "': " + errno_text(errno);
    return folder;
  }
  if (info.st_uid != ::geteuid()) {
    folder.reason = "'" + dir + "' is owned by uid " + std::to_string(info.st_uid) + ", not by this user (uid " +
                    std::to_string(::geteuid()) + ")";
    return folder;
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    folder.reason = "'" + dir + "' is writable by group or others (mode " + octal(info.st_mode) + ")";
    return folder;
  }
  if (::faccessat(fd.get(), ".", W_OK | X_OK, AT_EACCESS) != 0) {
    folder.reason = "'" + dir + "' is not writable: " + errno_text(errno);
    return folder;
  }
  folder.fd = std::move(fd);
  folder.mode = DiskCacheMode::read_write;
  return folder;
}

}  // namespace kiln::detail

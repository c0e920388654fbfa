#include "cache_folder.hpp"

#include <cerrno>
#include <cstdio>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_names.hpp"

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

/// Creates and removes a file in the folder: the only test of writability that root, read-only
/// mounts, pseudo-filesystems (/proc, /sys) and network filesystems all answer truthfully; mode
/// bits and access(2) say "writable" to root for /proc. The name has a temporary file's shape, so
/// one left behind by a crash between the two calls is swept by the eviction pass and `clear`.
/// Returns empty when the folder is writable, else what failed.
std::string probe_writable(int dir_fd, const std::string& dir) {
  std::string probe;
  try {
    probe = temp_file_name("write-probe._." + std::string(32, '0') + ".kiln");
  } catch (const std::exception& error) {
    return std::string("cannot name a probe file: ") + error.what();
  }
  UniqueFd file(::openat(dir_fd, probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!file) return "'" + dir + "' is not writable: cannot create a file in it: " + errno_text(errno);
  if (const int err = file.close(); err != 0) {
    ::unlinkat(dir_fd, probe.c_str(), 0);
    return "'" + dir + "' is not writable: cannot close a file created in it: " + errno_text(err);
  }
  if (::unlinkat(dir_fd, probe.c_str(), 0) != 0)
    return "'" + dir + "' is not usable: cannot remove a file created in it: " + errno_text(errno);
  return {};
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
  if (auto failure = probe_writable(fd.get(), dir); !failure.empty()) {
    folder.reason = std::move(failure);
    return folder;
  }
  folder.fd = std::move(fd);
  folder.mode = DiskCacheMode::read_write;
  return folder;
}

}  // namespace kiln::detail

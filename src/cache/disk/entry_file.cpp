#include "entry_file.hpp"

#include <cerrno>
#include <ctime>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_names.hpp"
#include "unique_fd.hpp"

namespace kiln::detail {

namespace {

EntryRead bad(EntryRead read, std::string reason) {
  read.result = EntryRead::Result::bad;
  read.reason = std::move(reason);
  return read;
}

}  // namespace

EntryRead read_entry_file(int dir_fd, const std::string& name, const CacheKey& key, std::uint64_t max_bytes,
                          int touch_after_s, bool root_owned_ok) {
  EntryRead read;
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    if (err == ELOOP) return bad(std::move(read), "a symlink (never followed)");
    if (err != ENOENT) read.reason = "cannot open: " + errno_text(err);
    return read;
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    read.reason = "cannot stat: " + errno_text(errno);
    return read;
  }
  read.seen = true;
  read.dev = info.st_dev;
  read.ino = info.st_ino;
  if (!S_ISREG(info.st_mode)) return bad(std::move(read), "not a regular file");
  if (info.st_uid != ::geteuid() && !(root_owned_ok && info.st_uid == 0))
    return bad(std::move(read), "owned by uid " + std::to_string(info.st_uid) + ", not by this user");
  // Why, whoever owns it: a file others may write holds whatever they put there, and a read-only
  // layer's folder check says nothing about the mode of the files in it.
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) return bad(std::move(read), "writable by group or others");
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size > max_bytes) {
    read.result = EntryRead::Result::too_large;
    read.reason = std::to_string(size) + " bytes, more than this process's cache bound of " + std::to_string(max_bytes);
    return read;
  }
  read.bytes.resize(static_cast<std::size_t>(size));
  if (const int err = read_exact(fd.get(), read.bytes.data(), read.bytes.size()); err != 0)
    return bad(std::move(read), err < 0 ? "shorter than its size" : "read failed: " + errno_text(err));
  EntryDecode decoded = decode_entry(read.bytes.data(), read.bytes.size(), key);
  if (!decoded.ok())
    return bad(std::move(read), std::string(to_string(decoded.fault)) + ": " + decoded.detail);
  read.view = std::move(decoded.entry);
  read.result = EntryRead::Result::ok;
  // Why: at most one touch per interval, because on NFS every futimens is a round trip.
  if (touch_after_s > 0 && info.st_mtime + touch_after_s < std::time(nullptr)) ::futimens(fd.get(), nullptr);
  return read;
}

void remove_bad_entry(int dir_fd, const std::string& name, const EntryRead& seen) {
  struct stat now {};
  if (::fstatat(dir_fd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) return;
  // Why a symlink check when nothing was opened: then the name was judged bad for being a symlink,
  // and anything else there now is a writer's entry renamed into place since.
  const bool same = seen.seen ? now.st_dev == seen.dev && now.st_ino == seen.ino : S_ISLNK(now.st_mode);
  if (!same) return;
  ::unlinkat(dir_fd, name.c_str(), S_ISDIR(now.st_mode) ? AT_REMOVEDIR : 0);
}

std::string publish_entry_file(int dir_fd, const std::string& name, const std::vector<std::uint8_t>& bytes,
                               mode_t mode) {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && bytes.size() > limit.rlim_cur)
    return "entry of " + std::to_string(bytes.size()) + " bytes exceeds the file size limit (RLIMIT_FSIZE " +
           std::to_string(limit.rlim_cur) + ")";
  const std::string temp = temp_file_name(name);
  UniqueFd fd(::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return "cannot create " + temp + ": " + errno_text(errno);
  auto fail = [&](const std::string& what, int err) {
    fd.close();
    ::unlinkat(dir_fd, temp.c_str(), 0);
    return what + " " + temp + ": " + errno_text(err);
  };
  if (::fchmod(fd.get(), mode) != 0) return fail("cannot set the mode of", errno);
  if (const int err = write_all(fd.get(), bytes.data(), bytes.size()); err != 0) return fail("cannot write", err);
  if (::fsync(fd.get()) != 0) return fail("cannot fsync", errno);
  if (const int err = fd.close(); err != 0) return fail("cannot close", err);
  if (::renameat(dir_fd, temp.c_str(), dir_fd, name.c_str()) != 0) return fail("cannot rename", errno);
  // Why: makes the rename itself durable; some filesystems refuse fsync on a folder, which is fine.
  ::fsync(dir_fd);
  return {};
}

}  // namespace kiln::detail

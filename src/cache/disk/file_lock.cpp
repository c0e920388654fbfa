#include "file_lock.hpp"

#include <algorithm>
#include <cerrno>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::detail {

namespace {

UniqueFd open_lock_file(int dir_fd, const std::string& name, bool create) {
  const int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0);
  return UniqueFd(::openat(dir_fd, name.c_str(), flags, 0600));
}

/// flock without waiting: 0 when locked, EWOULDBLOCK when held elsewhere, else an errno.
int try_flock(int fd) {
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno != EINTR) return errno;
  }
}

/// Whether the locked descriptor is still the file at `name` (not unlinked or replaced).
bool still_named(int dir_fd, const std::string& name, int fd) {
  struct stat by_fd {}, by_name {};
  if (::fstat(fd, &by_fd) != 0) return false;
  if (::fstatat(dir_fd, name.c_str(), &by_name, AT_SYMLINK_NOFOLLOW) != 0) return false;
  return by_fd.st_dev == by_name.st_dev && by_fd.st_ino == by_name.st_ino;
}

}  // namespace

LockAttempt acquire_file_lock(int dir_fd, const std::string& name, std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  auto pause = std::chrono::microseconds(500);
  LockAttempt attempt;
  for (;;) {
    UniqueFd fd = open_lock_file(dir_fd, name, true);
    if (!fd) {
      attempt.error = "openat(" + name + "): " + errno_text(errno);
      return attempt;
    }
    for (;;) {
      const int err = try_flock(fd.get());
      if (err == 0) break;
      if (err != EWOULDBLOCK) {
        attempt.error = "flock(" + name + "): " + errno_text(err);
        return attempt;
      }
      attempt.waited = true;
      const auto now = clock::now();
      if (now >= deadline) {
        attempt.status = LockStatus::timed_out;
        return attempt;
      }
      // Why: growing pauses up to 20 ms: a waiter notices a release quickly without spinning.
      std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
    if (still_named(dir_fd, name, fd.get())) {
      attempt.status = LockStatus::acquired;
      attempt.fd = std::move(fd);
      return attempt;
    }
    // The file we locked was removed by remove_idle_lock or clear; lock the current one instead.
    if (clock::now() >= deadline) {
      attempt.status = LockStatus::timed_out;
      return attempt;
    }
  }
}

bool remove_idle_lock(int dir_fd, const std::string& name) {
  UniqueFd fd = open_lock_file(dir_fd, name, false);
  if (!fd || try_flock(fd.get()) != 0) return false;
  if (!still_named(dir_fd, name, fd.get())) return false;
  return ::unlinkat(dir_fd, name.c_str(), 0) == 0;
}

}  // namespace kiln::detail

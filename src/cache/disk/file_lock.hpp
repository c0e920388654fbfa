#pragma once
// Per-key lock files: flock(2) on `<stem>.lock` in the cache folder. Internal.
//
// Why flock: the kernel drops it when the holder dies (SIGKILL included), so a crashed compile
// never leaves a stale lock behind. Why polling with a timeout: a live holder that is stuck (or a
// network filesystem that never answers) must not hang everyone; after the timeout the caller
// compiles without the lock, which costs a duplicate compile and nothing else, because entries are
// published atomically.

#include <chrono>
#include <string>

#include "unique_fd.hpp"

namespace kiln::detail {

enum class LockStatus {
  acquired,
  timed_out,  ///< another holder kept it for the whole timeout
  failed,     ///< the lock file could not be opened or the filesystem has no working flock
};

struct LockAttempt {
  LockStatus status = LockStatus::failed;
  bool waited = false;   ///< someone else held it at first
  std::string error;     ///< for `failed`: the call and errno text
  UniqueFd fd;           ///< holds the lock while open; closing it releases
};

/// Takes an exclusive lock on `name` in `dir_fd`, creating the file (0600, never through a
/// symlink). Retries when the file it locked was unlinked or replaced meanwhile (see
/// remove_idle_lock), so two processes never both believe they hold the same path's lock.
LockAttempt acquire_file_lock(int dir_fd, const std::string& name, std::chrono::milliseconds timeout);

/// Unlinks the lock file `name` if nobody holds it (taken without waiting, unlinked while held so
/// no one can be mid-acquire on it). Returns whether it was removed.
bool remove_idle_lock(int dir_fd, const std::string& name);

}  // namespace kiln::detail

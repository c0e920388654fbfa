#pragma once
// Reading and publishing one entry file in the cache folder (descriptor-relative). Internal.

#include <cstdint>
#include <string>
#include <vector>

#include <sys/types.h>

#include "cache/disk/cache_entry.hpp"

namespace kiln::detail {

struct EntryRead {
  /// too_large: not read, because it is larger than this process's bound; says nothing about the
  /// entry, which a process with a larger bound may have written and may use.
  enum class Result { ok, absent, bad, too_large };
  Result result = Result::absent;
  std::string reason;               ///< bad: what is wrong; too_large: the sizes; absent: empty, or why it could not be opened
  std::vector<std::uint8_t> bytes;  ///< the file; `view` points into it
  EntryView view;                   ///< valid when ok
  bool seen = false;                ///< a file was opened: `dev`/`ino` identify it (bad and not seen: a symlink)
  dev_t dev = 0;
  ino_t ino = 0;
};

/// Opens `name` without following a symlink and without blocking (a FIFO cannot hang us), accepts
/// only a regular file owned by the effective user and not writable by group or others, reads it
/// whole and decodes it against `key`.
/// A file larger than `max_bytes` is too_large, not read (and never bad: bounds differ between
/// processes). `touch_after_s` > 0: a good entry whose mtime is older than that
/// many seconds gets its mtime set to now (shared LRU recency). `root_owned_ok`: a file owned by
/// root is accepted too (read-only layers, e.g. a folder baked into an image).
EntryRead read_entry_file(int dir_fd, const std::string& name, const CacheKey& key, std::uint64_t max_bytes,
                          int touch_after_s, bool root_owned_ok = false);

/// Deletes the bad entry `name`, but only if it is still the file `seen` described, or still a
/// symlink when `seen` was one (a writer may have just renamed a good entry over it); a symlink is
/// removed itself, never its target.
/// ENOENT and EBUSY are harmless races and ignored.
void remove_bad_entry(int dir_fd, const std::string& name, const EntryRead& seen);

/// Writes `bytes` to a fresh temporary file next to `name`, gives it `mode` (whatever the umask),
/// fsyncs, closes and renames it to `name`, then fsyncs the folder: `name` never has another mode.
/// Returns empty on success, else what failed (the temporary is removed). Refuses, without
/// writing, an entry larger than RLIMIT_FSIZE (writing would raise SIGXFSZ, which kills the
/// process by default).
std::string publish_entry_file(int dir_fd, const std::string& name, const std::vector<std::uint8_t>& bytes,
                               mode_t mode = 0600);

}  // namespace kiln::detail

#pragma once
// Opening the cache folder and deciding whether it is safe to use. Internal.

#include <string>

#include "cache/disk/disk_cache.hpp"
#include "unique_fd.hpp"

namespace kiln::detail {

struct OpenedFolder {
  UniqueFd fd;                                       ///< open only when `mode` is read_write
  DiskCacheMode mode = DiskCacheMode::memory_only;
  std::string reason;                                ///< why not read_write
};

/// Creates `dir` and its missing parents with mode 0700, opens it (following a symlink: the
/// folder it points to is what gets checked and used), and accepts it only if it is a directory
/// owned by the effective user, not writable by group or others, and writable by us: a file is
/// created (O_EXCL, through the folder's descriptor) and removed, because permission bits say
/// nothing to root (as root, /proc passes every bit check and takes no file).
OpenedFolder open_cache_folder(const std::string& dir);

}  // namespace kiln::detail

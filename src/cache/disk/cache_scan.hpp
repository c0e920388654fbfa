#pragma once
// Listing kiln's files in the cache folder, with size and mtime. Internal.

#include <cstdint>
#include <string>
#include <vector>

#include <time.h>

#include "cache_names.hpp"

namespace kiln::detail {

struct ScannedFile {
  std::string name;
  CacheFileName parsed;
  bool regular = false;  ///< a regular file (not a symlink, folder, FIFO, ...)
  std::uint64_t size = 0;
  timespec mtime{};
};

/// kiln's files in `dir_fd` (see cache_names.hpp); other files are skipped, and so are files that
/// vanish while scanning. On failure to read the folder, returns what was found and sets `error`.
std::vector<ScannedFile> scan_cache_folder(int dir_fd, std::string& error);

}  // namespace kiln::detail

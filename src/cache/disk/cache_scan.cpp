#include "cache_scan.hpp"

#include <cerrno>
#include <memory>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "unique_fd.hpp"

namespace kiln::detail {

std::vector<ScannedFile> scan_cache_folder(int dir_fd, std::string& error) {
  std::vector<ScannedFile> files;
  // Why: a fresh descriptor for the listing, because fdopendir takes ownership and shares the offset.
  UniqueFd listing(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!listing) {
    error = "cannot open the cache folder for listing: " + errno_text(errno);
    return files;
  }
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(listing.get()), &::closedir);
  if (!dir) {
    error = "fdopendir failed: " + errno_text(errno);
    return files;
  }
  listing.release();
  for (;;) {
    errno = 0;
    const dirent* item = ::readdir(dir.get());
    if (item == nullptr) {
      if (errno != 0) error = "readdir failed: " + errno_text(errno);
      return files;
    }
    auto parsed = parse_cache_file_name(item->d_name);
    if (!parsed) continue;
    struct stat info {};
    if (::fstatat(dir_fd, item->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
    ScannedFile file;
    file.name = item->d_name;
    file.parsed = std::move(*parsed);
    file.regular = S_ISREG(info.st_mode);
    file.size = static_cast<std::uint64_t>(info.st_size);
    file.mtime = info.st_mtim;
    files.push_back(std::move(file));
  }
}

}  // namespace kiln::detail

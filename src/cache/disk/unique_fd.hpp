#pragma once
// A file descriptor owned by one object, and whole-buffer read/write that survive EINTR and short
// transfers. Internal to the disk cache.

#include <cstddef>
#include <string>

namespace kiln::detail {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept;
  /// close(2)'s result: 0, or the errno (a failed close can mean lost data on NFS).
  int close() noexcept;

 private:
  int fd_ = -1;
};

/// strerror for `err`, thread-safe.
std::string errno_text(int err);

/// Reads exactly `size` bytes from the current offset. Returns 0, an errno, or -1 when the file
/// ended first.
int read_exact(int fd, void* data, std::size_t size) noexcept;

/// Writes all `size` bytes. Returns 0 or an errno.
int write_all(int fd, const void* data, std::size_t size) noexcept;

}  // namespace kiln::detail

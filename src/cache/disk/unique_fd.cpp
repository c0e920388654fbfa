#include "unique_fd.hpp"

#include <cerrno>
#include <cstring>

#include <unistd.h>

namespace kiln::detail {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() { close(); }

int UniqueFd::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

int UniqueFd::close() noexcept {
  if (fd_ < 0) return 0;
  // Why: no retry on EINTR; Linux frees the descriptor anyway and a retry could close a reused one.
  const int result = ::close(release());
  return result == 0 ? 0 : errno;
}

std::string errno_text(int err) {
  char buffer[256];
  // GNU strerror_r returns the message pointer, which may not be `buffer`.
  return ::strerror_r(err, buffer, sizeof buffer);
}

int read_exact(int fd, void* data, std::size_t size) noexcept {
  auto* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::read(fd, at, size);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return -1;
    at += got;
    size -= static_cast<std::size_t>(got);
  }
  return 0;
}

int write_all(int fd, const void* data, std::size_t size) noexcept {
  const auto* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t put = ::write(fd, at, size);
    if (put < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (put == 0) return EIO;  // Why: a write that makes no progress would otherwise loop forever
    at += put;
    size -= static_cast<std::size_t>(put);
  }
  return 0;
}

}  // namespace kiln::detail

#include "cache/disk/read_only_folder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "base/log.hpp"
#include "cache_names.hpp"
#include "cache_scan.hpp"
#include "entry_file.hpp"

namespace kiln {

ReadOnlyFolder::ReadOnlyFolder(std::string path) : path_(std::move(path)) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    state_ = std::string("not used: ") + std::strerror(errno);
    logger().debug("cache layer '{}' {}", path_, state_);
    return;
  }
  struct stat info {};
  std::string unsafe;
  if (::fstat(fd, &info) != 0)
    unsafe = std::string("cannot stat: ") + std::strerror(errno);
  else if (info.st_uid != ::geteuid() && info.st_uid != 0)
    unsafe = "owned by uid " + std::to_string(info.st_uid) + ", neither this user nor root";
  else if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    unsafe = "writable by group or others";
  if (!unsafe.empty()) {
    ::close(fd);
    state_ = "not used: " + unsafe;
    logger().warn("cache layer '{}' {}", path_, state_);
    return;
  }
  fd_ = fd;
  state_ = "read-only";
}

ReadOnlyFolder::~ReadOnlyFolder() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<CompiledModule> ReadOnlyFolder::find(const CacheKey& key, const std::string& module,
                                                   const Target& target) {
  if (fd_ < 0) return std::nullopt;
  const std::string target_name = target.name();
  const std::string name = detail::entry_file_name(key, module, target_name);
  // Why no size bound: nothing here is evicted, and the entry was within its writer's bound.
  detail::EntryRead read =
      detail::read_entry_file(fd_, name, key, std::numeric_limits<std::uint64_t>::max(), 0, /*root_owned_ok=*/true);
  if (read.result == detail::EntryRead::Result::ok && (read.view.module != module || read.view.target != target_name)) {
    read.result = detail::EntryRead::Result::bad;
    read.reason = "holds module '" + std::string(read.view.module) + "' for '" + std::string(read.view.target) + "'";
  }
  if (read.result != detail::EntryRead::Result::ok) {
    if (read.result == detail::EntryRead::Result::bad) {
      bad_entries_.fetch_add(1);
      if (!warned_bad_.exchange(true))
        logger().warn("cache layer '{}': skipped bad entry '{}' ({}); read-only, so it stays", path_, name, read.reason);
    }
    return std::nullopt;
  }
  hits_.fetch_add(1);
  CompiledModule out;
  out.module = module;
  out.target = target;
  out.options = std::move(read.view.options);
  out.ptx = std::string(read.view.ptx);
  out.cubin.assign(read.view.cubin, read.view.cubin + read.view.cubin_size);
  out.log = std::string(read.view.log);
  out.compile_ms = read.view.compile_ms;
  return out;
}

LayerReport ReadOnlyFolder::report() const {
  LayerReport out;
  out.path = path_;
  out.kind = "folder";
  out.usable = fd_ >= 0;
  out.state = state_;
  out.hits = hits_.load();
  out.bad_entries = bad_entries_.load();
  if (fd_ < 0) return out;
  std::string error;
  for (const auto& file : detail::scan_cache_folder(fd_, error))
    if (file.parsed.kind == detail::CacheFileKind::entry) {
      ++out.entries;
      ++out.per_target[file.parsed.target];
    }
  return out;
}

}  // namespace kiln

#include "cache/bundle/bundle_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "cache/disk/cache_entry.hpp"

namespace kiln::bundle {

namespace {

}  // namespace

BundleFile::BundleFile(std::string path, const SigningKey* key, bool warn) : path_(std::move(path)) {
  error_ = open(key);
  if (error_.empty()) {
    logger().debug("bundle '{}': {} entries by NVRTC {}", path_, index_->records.size(), index_->nvrtc_build);
  } else if (warn) {
    logger().warn("bundle '{}' not used: {}; carrying on with the other cache layers", path_, error_);
  } else {
    logger().debug("bundle '{}' not used: {}", path_, error_);
  }
}

std::string BundleFile::open(const SigningKey* key) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    return std::string("cannot stat: ") + std::strerror(err);
  }
  std::string unsafe;
  if (!S_ISREG(info.st_mode))
    unsafe = "not a regular file";
  else if (info.st_uid != ::geteuid() && info.st_uid != 0)
    unsafe = "owned by uid " + std::to_string(info.st_uid) + ", neither this user nor root";
  else if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    unsafe = "writable by group or others, so anyone could change the code it holds";
  else if (info.st_size == 0)
    unsafe = "truncated: 0 bytes";
  if (!unsafe.empty()) {
    ::close(fd);
    return unsafe;
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // Why: the mapping keeps the file; the descriptor is not needed
  if (mapped == MAP_FAILED) return std::string("cannot mmap: ") + std::strerror(map_errno);
  data_ = static_cast<const std::uint8_t*>(mapped);
  size_ = size;
  BundleDecode decoded = decode_bundle(data_, size_, key);
  if (!decoded.index) return decoded.error;
  index_ = std::move(decoded.index);
  return {};
}

BundleFile::~BundleFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

std::optional<CompiledModule> BundleFile::find(const CacheKey& key, const std::string& module, const Target& target) {
  if (!index_) return std::nullopt;
  const auto& records = index_->records;
  const auto found = std::lower_bound(records.begin(), records.end(), key,
                                      [](const IndexRecord& record, const CacheKey& k) { return record.key.bytes < k.bytes; });
  if (found == records.end() || found->key != key) return std::nullopt;
  const std::string target_name = target.name();
  EntryDecode decoded = decode_entry(data_ + found->offset, static_cast<std::size_t>(found->size), key);
  std::string bad;
  if (!decoded.ok())
    bad = std::string(to_string(decoded.fault)) + ": " + decoded.detail;
  else if (decoded.entry.module != module || decoded.entry.target != target_name || found->module != module ||
           found->target != target_name)
    bad = "holds module '" + std::string(decoded.entry.module) + "' for '" + std::string(decoded.entry.target) +
          "', expected '" + module + "' for '" + target_name + "'";
  if (!bad.empty()) {
    bad_entries_.fetch_add(1);
    if (!warned_bad_.exchange(true))
      logger().warn("bundle '{}': skipped bad entry {} for {} ({}); other entries are still used", path_, module,
                    target_name, bad);
    return std::nullopt;
  }
  hits_.fetch_add(1);
  return compiled_module_of(decoded.entry, target);
}

std::vector<std::string> BundleFile::verify_entries() const {
  std::vector<std::string> problems;
  if (!index_) return {error_};
  for (const auto& record : index_->records) {
    const EntryDecode decoded = decode_entry(data_ + record.offset, static_cast<std::size_t>(record.size), record.key);
    std::string bad;
    if (!decoded.ok())
      bad = std::string(to_string(decoded.fault)) + ": " + decoded.detail;
    else if (decoded.entry.module != record.module || decoded.entry.target != record.target)
      bad = "holds module '" + std::string(decoded.entry.module) + "' for '" + std::string(decoded.entry.target) + "'";
    if (!bad.empty()) problems.push_back(record.module + " " + record.target + " " + record.key.hex() + ": " + bad);
  }
  return problems;
}

LayerReport BundleFile::report() const {
  LayerReport out;
  out.path = path_;
  out.kind = "bundle";
  out.usable = usable();
  out.state = usable() ? "read-only" : error_;
  out.hits = hits_.load();
  out.bad_entries = bad_entries_.load();
  if (!index_) return out;
  out.entries = index_->records.size();
  for (const auto& record : index_->records) ++out.per_target[record.target];
  out.nvrtc_build = index_->nvrtc_build;
  switch (index_->signature) {
    case SignatureState::unsigned_bundle: out.signature = "unsigned"; break;
    case SignatureState::verified: out.signature = "verified"; break;
    case SignatureState::not_checked: out.signature = "signed, not checked (no KILN_REMOTE_CACHE_KEY_FILE)"; break;
  }
  return out;
}

}  // namespace kiln::bundle

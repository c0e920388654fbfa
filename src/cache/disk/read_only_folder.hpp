#pragma once
/// @file
/// A cache folder used as a read-only layer of KILN_CACHE_PATH (a folder baked into an image, or
/// one after the first writable folder): entries are verified like the disk cache's, but nothing
/// is ever written (no touch, no healing, no locks), and a read-only folder is not worth a warning.

#include <atomic>
#include <cstdint>
#include <string>

#include "cache/cache_layer.hpp"

namespace kiln {

class ReadOnlyFolder final : public CacheLayer {
 public:
  /// Opens `path` once: a folder owned by this user or root, not writable by group or others
  /// (otherwise not used, one warning). A missing folder is not used, without a warning.
  explicit ReadOnlyFolder(std::string path);
  ~ReadOnlyFolder() override;
  ReadOnlyFolder(const ReadOnlyFolder&) = delete;
  ReadOnlyFolder& operator=(const ReadOnlyFolder&) = delete;

  std::optional<CompiledModule> find(const CacheKey& key, const std::string& module, const Target& target) override;
  LayerReport report() const override;

 private:
  std::string path_;
  int fd_ = -1;
  std::string state_;
  mutable std::atomic<std::uint64_t> hits_{0}, bad_entries_{0};
  std::atomic<bool> warned_bad_{false};
};

}  // namespace kiln

#pragma once
/// @file
/// A bundle on disk as a read-only cache layer: mapped with mmap (PROT_READ) once, checked as a
/// whole at open (bundle_format.hpp), never written. A refused bundle (truncated, corrupt, badly
/// signed, unsafe, another format) is a layer that finds nothing, with one warning naming the file
/// and the reason; the process carries on with the other layers. Replace a bundle in use by rename,
/// never in place (a file shrunk under a mapping faults on access).

#include <atomic>
#include <memory>
#include <string>

#include "cache/bundle/bundle_format.hpp"
#include "cache/cache_layer.hpp"

namespace kiln::bundle {

class BundleFile final : public CacheLayer {
 public:
  /// Opens and checks `path`: a regular file owned by this user or root and not writable by group
  /// or others, whose whole-file checksum (and, with `key`, signature) is good. Never throws but
  /// bad_alloc; `warn` false keeps a refusal at debug level (for `kiln pack --verify`, which prints it).
  BundleFile(std::string path, const SigningKey* key, bool warn = true);
  ~BundleFile() override;
  BundleFile(const BundleFile&) = delete;
  BundleFile& operator=(const BundleFile&) = delete;

  bool usable() const noexcept { return index_.has_value(); }
  const std::string& error() const noexcept { return error_; }
  /// The checked index; only when usable().
  const BundleIndex& index() const { return *index_; }

  std::optional<CompiledModule> find(const CacheKey& key, const std::string& module, const Target& target) override;
  std::string recorded_nvrtc_build() const override { return usable() ? index_->nvrtc_build : std::string(); }
  LayerReport report() const override;

  /// Decodes every entry against its index record (key, module, target, checksum); returns the
  /// problems, one line each ("<module> <target> <key>: why"), empty when all are good.
  std::vector<std::string> verify_entries() const;

 private:
  /// Maps and checks the file; empty on success, else why it is refused.
  std::string open(const SigningKey* key);

  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::optional<BundleIndex> index_;
  std::string error_;
  mutable std::atomic<std::uint64_t> hits_{0}, bad_entries_{0};
  std::atomic<bool> warned_bad_{false};
};

}  // namespace kiln::bundle

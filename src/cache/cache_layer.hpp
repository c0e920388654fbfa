#pragma once
/// @file
/// A read-only tier of the layered cache path (`KILN_CACHE_PATH`): a bundle or a folder that kiln
/// reads and never writes. The writable folder stays the DiskCache.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "cache/cache_key.hpp"
#include "jit/compiled_module.hpp"
#include "kiln/target.hpp"

namespace kiln {

/// What a layer is and holds, for `kiln info` and `kiln warm --json`.
struct LayerReport {
  std::string path;
  std::string kind;        ///< "bundle" or "folder"
  bool usable = false;     ///< false: refused or absent; `state` says why
  std::string state;       ///< "read-only", or why it is not used
  std::uint64_t entries = 0;
  std::map<std::string, std::uint64_t> per_target;  ///< entries by target name
  std::string nvrtc_build; ///< bundles: the NVRTC that made them
  std::string signature;   ///< bundles: "unsigned", "verified", "not checked (no key)"
  std::uint64_t hits = 0;         ///< lookups answered by this layer in this process
  std::uint64_t bad_entries = 0;  ///< entries found bad at use, skipped
};

/// One read-only layer. Every member may be called from many threads at once.
class CacheLayer {
 public:
  virtual ~CacheLayer() = default;
  /// The verified binary of `module` for `target` under `key`, or nothing (absent, or bad: then
  /// skipped, counted and warned about once). Never writes anything.
  virtual std::optional<CompiledModule> find(const CacheKey& key, const std::string& module, const Target& target) = 0;
  /// The NVRTC build its entries were made with, when the layer records one (bundles); empty otherwise.
  virtual std::string recorded_nvrtc_build() const { return {}; }
  virtual LayerReport report() const = 0;
};

}  // namespace kiln

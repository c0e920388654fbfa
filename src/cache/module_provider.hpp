#pragma once
/// @file
/// Where a device's memory cache gets binaries: the tiers behind it (the disk cache in front of the
/// NVRTC compiler), as one interface the cache and the prefetch share.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"
#include "jit/compiled_module.hpp"
#include "jit/registry.hpp"
#include "kiln/target.hpp"

namespace kiln {

class Compiler;
class DiskCache;
class RemoteCache;
std::shared_ptr<RemoteCache> process_remote_cache();

/// A binary handed to the cache, and where it came from (for the counters).
struct ProvidedModule {
  CompiledModule module;
  bool from_disk = false;  ///< read from a cache tier (the disk, or Redis through it) rather than compiled now
};

/// Where a cache gets binaries: the disk cache in front of the NVRTC compiler. Both functions may
/// be called from many threads at once (different modules, different devices); one cache never
/// calls them twice at once for the same module.
struct ModuleProvider {
  /// The binary of `source` for `target`, read from disk or compiled. Throws (kiln::Error, with
  /// the NVRTC log in its context for a compile failure) when there is none; the cache then
  /// remembers the module as failed.
  std::function<ProvidedModule(const KernelSource& source, const Target& target)> provide;
  /// The driver refused `module` as a bad image: drop it from the disk cache, so that the next
  /// `provide` compiles afresh. May be empty (no disk cache).
  std::function<void(const KernelSource& source, const CompiledModule& module)> evict;
};

/// The ModuleProvider kiln uses: `disk` (may be disabled) in front of `remote` (may be disabled;
/// a remote hit is written to `disk`) in front of `compiler`. Keys come from
/// the linked NVRTC's version and exact build (nvrtc_build), the target, the compiler's options, the module and every embedded
/// header. Modules read from disk are dumped too when `KILN_DUMP_DIR` is set.
ModuleProvider make_module_provider(std::shared_ptr<DiskCache> disk, Compiler compiler,
                                    std::shared_ptr<RemoteCache> remote = process_remote_cache());

/// The cache key of `source` compiled for `target` with `options` by the linked NVRTC.
CacheKey module_cache_key(const KernelSource& source, const Target& target, const std::vector<std::string>& options);

/// The process's disk cache, configured from the environment on first use. Thread-safe.
std::shared_ptr<DiskCache> process_disk_cache();

}  // namespace kiln

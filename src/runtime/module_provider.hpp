#pragma once
/// @file
/// Where a device's memory cache gets binaries: the tiers behind it (the disk cache in front of the
/// NVRTC compiler), as one interface the cache and the prefetch share.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache_key.hpp"
#include "jit/compiled_module.hpp"
#include "jit/registry.hpp"
#include "kiln/target.hpp"

namespace kiln {

class CacheLayer;
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

/// The ModuleProvider kiln uses: the read-only `layers` (bundles and folders of KILN_CACHE_PATH, in
/// order), then `disk` (may be disabled), then `remote` (the Redis tier, may be disabled; a remote
/// hit is written to `disk`; with `KILN_JIT=off` a plain fetch, no lease), then `compiler` unless
/// `KILN_JIT=off`. Keys come from
/// NVRTC's exact build (nvrtc_build, read without loading NVRTC), the target, the compiler's options,
/// the module and every embedded header; with no NVRTC at all, a bundle is matched with the build
/// it records (so a bundle made by another NVRTC is refused by key whenever an NVRTC is present).
/// A module in no layer with `KILN_JIT=off`, or with no NVRTC, throws kiln::Error naming the module,
/// the target and what was searched (kind unavailable, permanent; call "KILN_JIT" or "nvrtc_api").
/// Modules read from a layer or disk are dumped too when `KILN_DUMP_DIR` is set.
ModuleProvider make_module_provider(std::shared_ptr<DiskCache> disk, Compiler compiler,
                                    std::vector<std::shared_ptr<CacheLayer>> layers = {},
                                    std::shared_ptr<RemoteCache> remote = process_remote_cache());

/// The cache key of `source` compiled for `target` with `options` by the process's NVRTC (nvrtc_build(),
/// read without loading it).
CacheKey module_cache_key(const KernelSource& source, const Target& target, const std::vector<std::string>& options);
/// The same by the NVRTC build `nvrtc_build` (a bundle's, when this process has no NVRTC).
CacheKey module_cache_key(const KernelSource& source, const Target& target, const std::vector<std::string>& options,
                          std::string_view nvrtc_build);

/// The process's disk cache, configured from the environment on first use (the writable folder of
/// KILN_CACHE_PATH, else KILN_CACHE_DIR or the default; cache_path.hpp). Thread-safe.
std::shared_ptr<DiskCache> process_disk_cache();

}  // namespace kiln

#pragma once
/// @file
/// The per-device memory cache of loaded modules: at most one loaded module per (device, module,
/// target, options), compiled once however many threads ask, and the kernel handles that point
/// into it.
///
/// One cache serves one device's primary context with one target; the options are whatever the
/// provider compiles that target with. So within a cache a module is found by its name alone, and
/// a process with GPUs of different archs has one cache (and one target) per device.

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "jit/registry.hpp"
#include "kiln/counters.hpp"
#include "kiln/kernel_handle.hpp"
#include "kiln/target.hpp"
#include "runtime/handle_table.hpp"
#include "runtime/module_provider.hpp"

namespace kiln {

namespace driver {
class PrimaryContext;
}

/// Finds a module's source by name; kiln's is find_module (the embedded registry). The sources it
/// returns must live as long as the cache.
using SourceLookup = std::function<const KernelSource*(std::string_view module)>;

/// Which modules a lookup may compile and return.
enum class FamilyRule {
  any,               ///< every module (try_kernel)
  carried_by_target  ///< only modules whose family the cache's target carries (try_target_kernel)
};

/// Loaded modules of one device. Every member is safe to call from many threads, except that the
/// cache must not be destroyed while a call is in flight.
class ModuleCache {
 public:
  /// Modules are loaded into `context` (which, with its driver table, must outlive the cache),
  /// found by `sources` and built for `target` by `provider`.
  ModuleCache(const driver::PrimaryContext& context, Target target, ModuleProvider provider,
              SourceLookup sources = find_module);
  /// Unloads every module.
  ~ModuleCache();
  ModuleCache(const ModuleCache&) = delete;
  ModuleCache& operator=(const ModuleCache&) = delete;

  const Target& target() const noexcept;
  int device() const noexcept;

  /// The handle of `entry` in `module`, loading the module on first use: the first caller calls
  /// the provider and loads the binary; callers asking for the same module meanwhile wait for that
  /// result; other modules proceed in parallel. 0, without compiling anything, when `sources` does
  /// not know `module`, when `entry` is not one of its entries, and when `rule` excludes it. 0 when
  /// the module failed. A permanent failure (a compile error, an image the driver refuses or that
  /// lacks an entry) is logged once at warn and remembered until clear(); a transient one (out of
  /// memory, a driver or disk error) is logged, answered with 0, and the next request tries again.
  /// A binary the driver refuses is evicted (`provider.evict`); if it came from disk it is compiled
  /// again once. A module already in memory costs a shared lock, a scan of the loaded modules and no
  /// allocation. Never throws.
  KernelHandle kernel(std::string_view module, std::string_view entry, FamilyRule rule = FamilyRule::any) noexcept;

  /// The kernel behind `handle`, with a share of its module that keeps it loaded while the
  /// result lives (a launch holds it across cuLaunchKernel, so a clear() meanwhile cannot unload the
  /// function under it). Throws kiln::Error (call "launch") for 0, for a handle this cache did not
  /// return ("handle was not returned by this backend (device N)"), and for a handle whose module
  /// clear() retired.
  LoadedKernel resolve(KernelHandle handle) const;

  /// Retires every loaded module's handles (resolve refuses them from now on) and unloads the
  /// module once no LoadedKernel of it is left; forgets failures, so the next `kernel` call tries
  /// again. A load in flight is not cancelled; its module stays. Each retired kernel leaves a small
  /// record behind (its names), so that a stale handle is told apart from a foreign one; records go
  /// with the cache.
  void clear() noexcept;

  ModuleCacheCounters counters() const noexcept;

  /// Changes whenever a handle this cache returned may have gone stale or a lookup that returned 0
  /// may now succeed: on clear() and on a transient failure. A caller that keeps handles (Service's
  /// quantizer) re-resolves when it changes.
  std::uint64_t generation() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln

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

#include "kiln/compiled_module.hpp"
#include "kiln/kernel_handle.hpp"
#include "kiln/registry.hpp"
#include "kiln/target.hpp"

namespace kiln {

namespace driver {
class PrimaryContext;
}

/// A binary handed to the cache, and where it came from (for the counters).
struct ProvidedModule {
  CompiledModule module;
  bool from_disk = false;  ///< read from the disk cache rather than compiled now
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

/// A snapshot of one cache's counters, monotonic since construction (clear() does not reset them).
struct ModuleCacheCounters {
  std::uint64_t memory_hits = 0;   ///< lookups answered from memory at once (loaded or failed module)
  std::uint64_t lock_waits = 0;    ///< lookups that waited for another thread loading the same module
  std::uint64_t disk_hits = 0;     ///< binaries the provider read from disk
  std::uint64_t compiles = 0;      ///< binaries the provider compiled (a failed compile is a failure)
  double compile_ms = 0;           ///< total `compile_ms` of those compiles
  std::uint64_t load_refused = 0;  ///< binaries the driver refused as bad images
  std::uint64_t failures = 0;      ///< modules that ended failed (each logged once)
};

/// What a handle stands for.
struct LoadedKernel {
  void* function = nullptr;  ///< the CUfunction
  std::string_view module;   ///< valid as long as the cache
  std::string_view entry;    ///< valid as long as the cache
};

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
  /// the module failed: a failure is logged once at warn and remembered until clear(). A binary
  /// the driver refuses is evicted (`provider.evict`); if it came from disk it is compiled again
  /// once. A module already in memory costs a shared lock, a scan of the loaded modules and no
  /// allocation. Never throws.
  KernelHandle kernel(std::string_view module, std::string_view entry, FamilyRule rule = FamilyRule::any) noexcept;

  /// The kernel behind `handle`. Throws kiln::Error (call "launch") for 0, for a handle this cache
  /// did not return ("handle was not returned by this backend (device N)"), and for a handle whose
  /// module clear() unloaded.
  LoadedKernel resolve(KernelHandle handle) const;

  /// Unloads every loaded module (their handles go stale: resolve refuses them) and forgets
  /// failures, so the next `kernel` call tries again. A load in flight is not cancelled; its module
  /// stays. Each unloaded kernel leaves a small record behind (its names), so that a stale handle
  /// is told apart from a foreign one; records go with the cache.
  void clear() noexcept;

  ModuleCacheCounters counters() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln

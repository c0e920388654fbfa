#pragma once
/// @file
/// A module's binary into one device's primary context: the provider's binary handed to
/// cuModuleLoadDataEx, its entries looked up, and a binary the driver refuses as a bad image
/// evicted (and, when it came from disk, compiled once more).

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "driver/driver_api.hpp"
#include "kiln/counters.hpp"
#include "runtime/module_provider.hpp"

namespace kiln::driver {

class PrimaryContext;

/// One module loaded in a primary context, with the function of each of its source's entries (in
/// entry order). Unloaded (cuModuleUnload; a failure is a warning) when destroyed, so whoever holds
/// it keeps its functions valid. The context must outlive it.
class LoadedModule {
 public:
  LoadedModule(const PrimaryContext& context, std::string name, CUmodule module);
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;

  CUmodule get() const noexcept { return module_; }
  const std::string& name() const noexcept { return name_; }
  const std::vector<CUfunction>& functions() const noexcept { return functions_; }

 private:
  friend class ModuleLoader;
  const PrimaryContext& context_;
  std::string name_;
  CUmodule module_;
  std::vector<CUfunction> functions_;
};

/// One load attempt's result: the module, or why there is none.
struct LoadResult {
  std::shared_ptr<const LoadedModule> module;  ///< null: failed
  std::string reason;
  /// The failure will recur on every try: a compile error, an image the driver refused twice or
  /// that lacks an entry, a wrong binary. Otherwise (out of memory, a driver or disk error) the
  /// next request may succeed.
  bool permanent = false;
};

/// Loads modules of one target into one context, from one provider. Safe to call from many
/// threads; the provider is called at most once per `load` call plus once more for a refused disk
/// binary.
class ModuleLoader {
 public:
  ModuleLoader(const PrimaryContext& context, Target target, ModuleProvider provider);

  /// The provider's binary of `source`, loaded, with every entry looked up. Never throws: a
  /// provider error (a failed compile: its NVRTC log is in the reason), a wrong binary, or a driver
  /// refusal comes back as the reason.
  LoadResult load(const KernelSource& source) noexcept;

  /// Adds this loader's counts (disk hits, compiles, compile time, refused binaries) to `out`.
  void add_counters(ModuleCacheCounters& out) const noexcept;

  const Target& target() const noexcept { return target_; }
  int device() const noexcept;

 private:
  std::shared_ptr<LoadedModule> load_once(const KernelSource& source, const CompiledModule& binary, CUresult& result,
                                          std::string& jit_log);

  const PrimaryContext& context_;
  const Target target_;
  const std::string target_name_;
  const ModuleProvider provider_;
  std::atomic<std::uint64_t> disk_hits_{0}, compiles_{0}, compile_us_{0}, load_refused_{0};
};

}  // namespace kiln::driver

#pragma once
/// @file
/// The real GpuBackend: one CUDA device through the driver API, loaded at run time.
///
/// Each backend retains its device's primary context (the one the CUDA runtime and PyTorch use),
/// picks that device's target, and owns that device's ModuleCache, so a process with GPUs of
/// different archs gives each its own target and modules. Without a driver, or when a device has
/// no target, a backend still exists: every handle is 0 and `unavailable_reason()` says why.
///
/// The overloads taking a `driver::DriverApi` are for tests, which pass a fake table; everyone else
/// uses the ones without it (the process's `libcuda.so.1`).

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jit/target_select.hpp"
#include "kiln/gpu_backend.hpp"
#include "runtime/module_cache.hpp"

namespace kiln {

class CacheLayer;
class DiskCache;
struct Config;

namespace driver {
struct DriverApi;
class PrimaryContext;
}  // namespace driver

/// What the driver offers this process, for `kiln info`.
struct DriverStatus {
  bool available = false;          ///< the driver loaded and reported its devices
  std::string reason;              ///< why not available; empty when it is
  std::optional<Version> version;  ///< cuDriverGetVersion, when the library could be opened
  std::vector<DeviceInfo> devices;
};

/// The process driver's status. Never throws.
DriverStatus driver_status();
/// The status of `api`. Never throws.
DriverStatus driver_status(const driver::DriverApi& api);

/// Picks the target of one device, given the driver's version.
using TargetChooser = std::function<TargetChoice(const DeviceInfo& device, std::optional<Version> driver)>;

/// kiln's rule: `KILN_ARCH` when set (target_override_from_env, which throws on a bad value), else
/// select_target over the device's compute capability, NVRTC and `driver`; with KILN_JIT=off or no
/// NVRTC (and NVRTC not loaded), select_target_without_compiler, so NVRTC is never loaded for it.
TargetChoice default_target_choice(const DeviceInfo& device, std::optional<Version> driver);

/// The same rule with `config`'s KILN_ARCH, looking in `layers` and `disk` (a Service's own cache
/// tiers) instead of the process's for binaries that spare loading NVRTC.
TargetChooser target_chooser(const Config& config, std::vector<std::shared_ptr<CacheLayer>> layers,
                             std::shared_ptr<DiskCache> disk);

/// What `--arch auto` means: `KILN_ARCH` when set, else the target of the process driver's first
/// GPU, else `sm_90a` (H100/H200) when there is no usable GPU.
Target auto_target();

class CudaBackend final : public GpuBackend {
 public:
  /// Device `ordinal` of the process driver, with default_target_choice. `provider` supplies
  /// binaries (see ModuleProvider) and must be safe to call from many threads. When the device's
  /// primary context is not active yet, prefetches every module the target carries (prefetch.hpp)
  /// while the context is retained, unless `KILN_PREFETCH=0`.
  CudaBackend(int ordinal, ModuleProvider provider);
  /// Device `ordinal` of `api` (which must outlive the backend), with the target `choose` picks.
  /// Throws kiln::Error for a negative ordinal, for one past the device count when the driver is
  /// loaded, and whatever `choose` throws. A missing driver or a failing driver call does not
  /// throw: the backend is unavailable, with the reason. With `prefetch` and the primary context
  /// not active yet, the modules the target carries start compiling (or loading from disk) before
  /// the context is retained.
  CudaBackend(const driver::DriverApi& api, int ordinal, ModuleProvider provider, const TargetChooser& choose,
              bool prefetch = false);
  /// Unloads this device's modules and releases its primary context.
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  /// One backend per device of the process driver; empty (and the reason logged at info) without
  /// a driver.
  static std::vector<std::unique_ptr<CudaBackend>> all(const ModuleProvider& provider);
  /// One backend per device of `api`, each with its own target from `choose`.
  static std::vector<std::unique_ptr<CudaBackend>> all(const driver::DriverApi& api, const ModuleProvider& provider,
                                                       const TargetChooser& choose);

  /// Name, compute capability and SM count; only `ordinal` is set when the device could not be read.
  const DeviceInfo& device() const override { return device_; }
  const std::optional<Target>& target() const override { return target_; }
  /// Handles can be nonzero: the context is retained and the device has a target.
  bool available() const noexcept { return modules_ != nullptr; }
  /// Why the backend is not available (no driver, a driver error, no target); empty when it is.
  const std::string& unavailable_reason() const noexcept { return unavailable_reason_; }
  /// Why this target, or why none (TargetChoice::reason); empty when the device was never read.
  const std::string& target_reason() const noexcept { return target_reason_; }

  /// See GpuBackend (ModuleCache::kernel over the embedded registry). 0 when unavailable.
  KernelHandle try_kernel(std::string_view module, std::string_view entry) override;
  KernelHandle try_target_kernel(std::string_view module, std::string_view entry) override;
  /// See GpuBackend. Makes the primary context current for the call (restoring the caller's) and
  /// launches with cuLaunchKernel, or with cuLaunchKernelEx and the programmatic stream
  /// serialization attribute for a PDL launch on an sm_90+ device whose driver has it; a driver
  /// failure is kiln::Error naming the call.
  using GpuBackend::launch;
  void launch(KernelHandle kernel, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, void* stream, void** args,
              LaunchOptions options) override;
  /// Whether a launch with `options` here uses PDL (see LaunchOptions::programmatic_dependent).
  bool launches_dependent(LaunchOptions options) const noexcept;

  /// This device's memory-cache counters; all zero when unavailable.
  ModuleCacheCounters counters() const noexcept;
  /// ModuleCache::clear: retire every handle, unload every module no launch holds, forget failures.
  void clear() noexcept;
  /// ModuleCache::generation; 0 when unavailable.
  std::uint64_t generation() const noexcept;

 private:
  const driver::DriverApi& api_;
  DeviceInfo device_;
  std::optional<Target> target_;
  std::string unavailable_reason_;
  std::string target_reason_;
  // Why: declared before modules_, so modules are unloaded before the context is released.
  std::unique_ptr<driver::PrimaryContext> context_;
  std::unique_ptr<ModuleCache> modules_;
};

}  // namespace kiln

#include "runtime/cuda_backend.hpp"

#include <algorithm>

#include "base/config.hpp"
#include "base/log.hpp"
#include "cache/cache_layer.hpp"
#include "cache/cache_path.hpp"
#include "cache/disk/disk_cache.hpp"
#include "driver/devices.hpp"
#include "driver/driver_api.hpp"
#include "driver/driver_check.hpp"
#include "driver/kernel_launch.hpp"
#include "driver/primary_context.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"
#include "kiln/error.hpp"
#include "runtime/module_provider.hpp"
#include "runtime/prefetch.hpp"

namespace kiln {

DriverStatus driver_status() { return driver_status(driver::driver_api()); }

DriverStatus driver_status(const driver::DriverApi& api) {
  DriverStatus status;
  status.version = api.version;
  if (!api.loaded) {
    status.reason = api.load_error;
    return status;
  }
  try {
    status.devices = driver::devices(api);
    status.available = true;
  } catch (const std::exception& error) {
    status.reason = error.what();
  }
  return status;
}

namespace {

using Layers = std::vector<std::shared_ptr<CacheLayer>>;

// Whether a read-only layer of KILN_CACHE_PATH (a bundle, a folder) holds binaries for `target`.
bool layers_hold(const Layers& layers, const Target& target) {
  for (const auto& layer : layers) {
    const LayerReport report = layer->report();
    if (report.usable && report.per_target.count(target.name()) != 0) return true;
  }
  return false;
}

// Whether the disk cache holds every module `target` carries, compiled by this NVRTC build: then
// that build compiled for `target`, so NVRTC's arch list, which loading NVRTC costs (7.6 ms here,
// 8.7 ms of a warm process's 1 ms budget on the H200's host), has nothing to add.
bool disk_holds(const DiskCache& disk, const Target& target) {
  const std::string& build = nvrtc_build();
  const auto modules = carried_modules(target);
  if (build.empty() || modules.empty()) return false;
  const std::vector<std::string> options = Compiler().options(target);
  return std::all_of(modules.begin(), modules.end(), [&](const KernelSource* source) {
    return disk.holds(module_cache_key(*source, target, options, build), source->module, target);
  });
}

// kiln's rule over `forced` (KILN_ARCH) and the cache tiers, which are asked for lazily: the
// process's tiers are made on first use.
TargetChoice choose_target(const DeviceInfo& device, std::optional<Version> driver, const std::optional<Target>& forced,
                           const std::function<const Layers&()>& layers,
                           const std::function<std::shared_ptr<DiskCache>()>& disk) {
  if (forced) return TargetChoice{forced, "KILN_ARCH=" + forced->name()};
  if (auto why = compiler_not_asked()) return select_target_without_compiler(device.cc, *why);
  // Why before asking NVRTC: a deployment whose layers hold this device's exact-arch binaries, or
  // a warm process whose disk cache does, must not load the compiler just to learn its arch list;
  // NVRTC loads later only if a module is missing.
  if (!nvrtc_load_attempted()) {
    const TargetChoice in_layers = select_target_without_compiler(device.cc, "the cache layers hold its binaries");
    if (in_layers.target && layers_hold(layers(), *in_layers.target)) return in_layers;
    const TargetChoice on_disk = select_target_without_compiler(device.cc, "the disk cache holds its binaries");
    if (on_disk.target && disk_holds(*disk(), *on_disk.target)) return on_disk;
  }
  return select_target(TargetInputs{device.cc, nvrtc_supported_archs(), nvrtc_version(), driver});
}

}  // namespace

TargetChoice default_target_choice(const DeviceInfo& device, std::optional<Version> driver) {
  return choose_target(
      device, driver, target_override_from_env(), []() -> const Layers& { return process_cache_path().layers; },
      [] { return process_disk_cache(); });
}

TargetChooser target_chooser(const Config& config, std::vector<std::shared_ptr<CacheLayer>> layers,
                             std::shared_ptr<DiskCache> disk) {
  // Why KILN_ARCH at each choice: parsing it may load NVRTC to check the arch, which a backend
  // that never reads a device must not do.
  return [config, layers = std::move(layers), disk = std::move(disk)](const DeviceInfo& device,
                                                                     std::optional<Version> driver) {
    return choose_target(
        device, driver, target_override(config), [&]() -> const Layers& { return layers; }, [&] { return disk; });
  };
}

Target auto_target() {
  if (auto overridden = target_override_from_env()) return *overridden;
  const DriverStatus driver = driver_status();
  if (!driver.devices.empty()) {
    const TargetChoice choice = default_target_choice(driver.devices.front(), driver.version);
    if (choice.target) return *choice.target;
  }
  // Why sm_90a: with no usable GPU, the H100/H200 is the most useful thing to build for and shows
  // both quantizer modules.
  return Target{{9, 0}, true, OutputKind::cubin};
}

CudaBackend::CudaBackend(int ordinal, ModuleProvider provider)
    : CudaBackend(driver::driver_api(), ordinal, std::move(provider), default_target_choice,
                  process_config().prefetch) {}

CudaBackend::CudaBackend(const driver::DriverApi& api, int ordinal, ModuleProvider provider,
                         const TargetChooser& choose, bool prefetch)
    : api_(api) {
  if (ordinal < 0) throw_invalid_argument("ordinal", "a device ordinal >= 0", std::to_string(ordinal));
  device_.ordinal = ordinal;
  if (!api.loaded) {
    unavailable_reason_ = api.load_error;
    return;
  }
  const auto unavailable = [&](const Error& error) {
    unavailable_reason_ = error.what();
    logger().warn("device {} is unavailable: {}", ordinal, unavailable_reason_);
  };
  int count = 0;
  try {
    count = driver::device_count(api);
  } catch (const Error& error) {
    unavailable(error);
    return;
  }
  if (ordinal >= count)
    throw_invalid_argument("ordinal", "a device ordinal below " + std::to_string(count), std::to_string(ordinal));
  try {
    device_ = driver::device_info(api, ordinal);
  } catch (const Error& error) {
    unavailable(error);
    return;
  }

  // Why the target before the context: it needs only the compute capability, and knowing it
  // lets the prefetch overlap NVRTC with cuDevicePrimaryCtxRetain, the slowest step of start-up.
  TargetChoice choice = choose(device_, api.version);
  target_reason_ = std::move(choice.reason);
  if (!choice.target) {
    unavailable_reason_ = "no compile target for device " + std::to_string(ordinal) + ": " + target_reason_;
    logger().warn("{}", unavailable_reason_);
    return;
  }
  try {
    // Why only while the context is inactive: then retaining it takes ~115 ms and the compiles fit
    // behind it; once anyone holds it, retaining is instant and the worker threads only add their
    // start-up (+0.35 ms to a warm process on the H200).
    if (prefetch && !driver::primary_context_active(api, ordinal))
      provider = prefetching_provider(std::move(provider), *choice.target, carried_modules(*choice.target));
    context_ = std::make_unique<driver::PrimaryContext>(api, ordinal);
  } catch (const Error& error) {
    unavailable(error);
    return;
  }
  target_ = choice.target;
  modules_ = std::make_unique<ModuleCache>(*context_, *target_, std::move(provider));
  logger().info("device {} ({}, compute capability {}.{}, {} SMs): target {} ({})", ordinal, device_.name,
                device_.cc.major, device_.cc.minor, device_.sm_count, target_->name(), target_reason_);
}

CudaBackend::~CudaBackend() = default;

std::vector<std::unique_ptr<CudaBackend>> CudaBackend::all(const ModuleProvider& provider) {
  return all(driver::driver_api(), provider, default_target_choice);
}

std::vector<std::unique_ptr<CudaBackend>> CudaBackend::all(const driver::DriverApi& api,
                                                           const ModuleProvider& provider,
                                                           const TargetChooser& choose) {
  std::vector<std::unique_ptr<CudaBackend>> backends;
  if (!api.loaded) {
    logger().info("no GPU backends: {}", api.load_error);
    return backends;
  }
  int count = 0;
  try {
    count = driver::device_count(api);
  } catch (const Error& error) {
    logger().warn("no GPU backends: {}", error.what());
    return backends;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal)
    backends.push_back(std::make_unique<CudaBackend>(api, ordinal, provider, choose));
  return backends;
}

KernelHandle CudaBackend::try_kernel(std::string_view module, std::string_view entry) {
  return modules_ ? modules_->kernel(module, entry) : KernelHandle{};
}

KernelHandle CudaBackend::try_target_kernel(std::string_view module, std::string_view entry) {
  return modules_ ? modules_->kernel(module, entry, FamilyRule::carried_by_target) : KernelHandle{};
}

bool CudaBackend::launches_dependent(LaunchOptions options) const noexcept {
  return options.programmatic_dependent && device_.cc.major >= 9 && api_.cuLaunchKernelEx != nullptr;
}

void CudaBackend::launch(KernelHandle kernel, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, void* stream,
                         void** args, LaunchOptions options) {
  if (!modules_)
    throw_error(ErrorKind::unavailable, Retry::permanent,
                "cannot launch on device " + std::to_string(device_.ordinal) + ": " + unavailable_reason_,
                ErrorContext{"launch", {}, {}, {}, {}});
  // Why held until the launch returns: `loaded` keeps the module loaded against a clear() meanwhile.
  const LoadedKernel loaded = modules_->resolve(kernel);
  driver::ScopedCurrent current(*context_);
  const bool dependent = launches_dependent(options);
  const CUresult result = driver::launch_kernel(api_, static_cast<CUfunction>(loaded.function), grid, block,
                                                shared_bytes, static_cast<CUstream>(stream), args, dependent);
  if (result != CUDA_SUCCESS)
    driver::throw_driver_error(api_, result, driver::launch_call_name(dependent),
                               ErrorContext{{}, std::string(loaded.module), target_->name(), {}, {}});
}

ModuleCacheCounters CudaBackend::counters() const noexcept {
  return modules_ ? modules_->counters() : ModuleCacheCounters{};
}

void CudaBackend::clear() noexcept {
  if (modules_) modules_->clear();
}

std::uint64_t CudaBackend::generation() const noexcept { return modules_ ? modules_->generation() : 0; }

}  // namespace kiln

#include "kiln/service.hpp"

#include <map>
#include <mutex>
#include <shared_mutex>

#include "base/config.hpp"
#include "cache/cache_path.hpp"
#include "cache/disk/disk_cache.hpp"
#include "cache/remote/remote_cache.hpp"
#include "driver/driver_api.hpp"
#include "jit/compiler.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/module_provider.hpp"
#include "service_internal.hpp"

namespace kiln {

struct Service::Parts {
  Parts(std::unique_ptr<CudaBackend> device_backend, std::shared_ptr<DiskCache> disk_cache,
        std::shared_ptr<RemoteCache> remote_cache = process_remote_cache())
      : disk(std::move(disk_cache)), remote(std::move(remote_cache)), backend(std::move(device_backend)) {}

  std::shared_ptr<DiskCache> disk;
  std::shared_ptr<RemoteCache> remote;
  std::unique_ptr<CudaBackend> backend;

  // The quantizer as last resolved, and the backend generation it was resolved at.
  std::shared_mutex fp8_mutex;
  bool fp8_resolved = false;
  std::uint64_t fp8_generation = 0;
  ops::Fp8ActQuant fp8;

  // Resolved variants of the quantizer family, by variant_key, with the generation of each.
  std::shared_mutex variants_mutex;
  std::map<std::uint32_t, std::pair<std::uint64_t, ops::GroupQuant>> variants;
};

namespace {

std::uint32_t variant_key(const ops::QuantVariant& v) {
  return static_cast<std::uint32_t>(v.input) | static_cast<std::uint32_t>(v.output) << 2 |
         static_cast<std::uint32_t>(v.scales) << 3 | std::uint32_t{v.ue8m0} << 5 | std::uint32_t{v.silu_and_mul} << 6 |
         (v.group & 0xffffu) << 8;
}

// Device `ordinal` over the process disk cache and cache path: what Service(ordinal) runs on.
std::unique_ptr<CudaBackend> process_backend(int ordinal) {
  return std::make_unique<CudaBackend>(ordinal,
                                       make_module_provider(process_disk_cache(), Compiler(), process_cache_path().layers));
}

}  // namespace

Service::Service(int ordinal) : parts_(std::make_unique<Parts>(process_backend(ordinal), process_disk_cache())) {}

Service::Service(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Service::~Service() = default;

GpuBackend& Service::gpu() noexcept { return *parts_->backend; }
bool Service::available() const noexcept { return parts_->backend->available(); }
const std::string& Service::unavailable_reason() const noexcept { return parts_->backend->unavailable_reason(); }

ops::Fp8ActQuant Service::fp8_act_quant() {
  Parts& parts = *parts_;
  // Why read before resolving: a clear() or transient failure during the resolve changes the
  // generation, so the result is not trusted past this call and the next one resolves again.
  const std::uint64_t generation = parts.backend->generation();
  {
    std::shared_lock lock(parts.fp8_mutex);
    if (parts.fp8_resolved && parts.fp8_generation == generation) return parts.fp8;
  }
  const ops::Fp8ActQuant fresh = ops::Fp8ActQuant::resolve(*parts.backend);
  std::unique_lock lock(parts.fp8_mutex);
  parts.fp8 = fresh;
  parts.fp8_generation = generation;
  parts.fp8_resolved = true;
  return fresh;
}

ops::GroupQuant Service::group_quant(const ops::QuantVariant& variant) {
  Parts& parts = *parts_;
  const std::uint64_t generation = parts.backend->generation();
  const std::uint32_t key = variant_key(variant);
  {
    std::shared_lock lock(parts.variants_mutex);
    const auto found = parts.variants.find(key);
    if (found != parts.variants.end() && found->second.first == generation && found->second.second.variant() == variant)
      return found->second.second;
  }
  const ops::GroupQuant fresh = ops::GroupQuant::resolve(*parts.backend, variant);
  std::unique_lock lock(parts.variants_mutex);
  parts.variants[key] = {generation, fresh};
  return fresh;
}

ServiceCounters Service::counters() const {
  return ServiceCounters{parts_->backend->counters(), parts_->disk->counters(), parts_->remote->counters()};
}

InternalService::InternalService(int ordinal) : InternalService(process_backend(ordinal), process_disk_cache()) {}

// Why no process singleton here: services built side by side from different Config values each
// keep their own cache folder, target and remote tier (test_service.cpp).
std::unique_ptr<Service::Parts> InternalService::parts_for(const driver::DriverApi& api, int ordinal, const Config& config) {
  CachePath path = cache_path_for(config);
  auto disk = std::make_shared<DiskCache>(path.writable);
  auto remote = remote_cache_for(config);
  ModuleProvider provider = make_module_provider(disk, Compiler(), path.layers, remote);
  auto backend = std::make_unique<CudaBackend>(api, ordinal, std::move(provider),
                                               target_chooser(config, std::move(path.layers), disk), config.prefetch);
  return std::make_unique<Service::Parts>(std::move(backend), std::move(disk), std::move(remote));
}

InternalService::InternalService(int ordinal, const Config& config)
    : InternalService(driver::driver_api(), ordinal, config) {}

InternalService::InternalService(const driver::DriverApi& api, int ordinal, const Config& config)
    : Service(parts_for(api, ordinal, config)) {}

InternalService::InternalService(int ordinal, std::shared_ptr<DiskCache> disk, Compiler compiler)
    : InternalService(std::make_unique<CudaBackend>(ordinal, make_module_provider(disk, std::move(compiler))), disk) {}

InternalService::InternalService(std::unique_ptr<CudaBackend> backend, std::shared_ptr<DiskCache> disk)
    : Service(std::make_unique<Parts>(std::move(backend), std::move(disk))) {}

CudaBackend& InternalService::backend() noexcept { return *parts().backend; }
const std::shared_ptr<DiskCache>& InternalService::disk() const noexcept { return parts().disk; }

}  // namespace kiln

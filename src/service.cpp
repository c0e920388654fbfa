#include "kiln/service.hpp"

#include <mutex>

#include "cache/disk/disk_cache.hpp"
#include "cache/module_provider.hpp"
#include "driver/cuda_backend.hpp"
#include "jit/compiler.hpp"

namespace kiln {

struct Service::Parts {
  Parts(int ordinal, std::shared_ptr<DiskCache> disk_cache, Compiler compiler)
      : disk(std::move(disk_cache)), backend(ordinal, make_module_provider(disk, std::move(compiler))) {}

  std::shared_ptr<DiskCache> disk;
  CudaBackend backend;
  std::once_flag fp8_once;
  ops::Fp8ActQuant fp8;
};

Service::Service(int ordinal) : Service(ordinal, process_disk_cache(), Compiler()) {}

Service::Service(int ordinal, std::shared_ptr<DiskCache> disk, Compiler compiler)
    : parts_(std::make_unique<Parts>(ordinal, std::move(disk), std::move(compiler))) {}

Service::~Service() = default;

GpuBackend& Service::gpu() noexcept { return parts_->backend; }
bool Service::available() const noexcept { return parts_->backend.available(); }
const std::string& Service::unavailable_reason() const noexcept { return parts_->backend.unavailable_reason(); }
CudaBackend& Service::backend() noexcept { return parts_->backend; }
const std::shared_ptr<DiskCache>& Service::disk() const noexcept { return parts_->disk; }

const ops::Fp8ActQuant& Service::fp8_act_quant() {
  std::call_once(parts_->fp8_once, [this] { parts_->fp8 = ops::Fp8ActQuant::resolve(parts_->backend); });
  return parts_->fp8;
}

ServiceCounters Service::counters() const {
  return ServiceCounters{parts_->backend.counters(), parts_->disk->counters()};
}

}  // namespace kiln

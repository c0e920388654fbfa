#pragma once
// A Service as kiln's own tools and tests use it: built from explicit parts (a fake driver's
// backend, a private disk cache, a compiler) and reaching them. Embedders get only kiln::Service
// (include/kiln/service.hpp); docs/architecture.md, "What the library exports".

#include <memory>

#include "kiln/service.hpp"

namespace kiln {

class CudaBackend;
class DiskCache;
class Compiler;
struct Config;

namespace driver {
struct DriverApi;
}

class InternalService : public Service {
 public:
  /// As Service(ordinal).
  explicit InternalService(int ordinal = 0);
  /// Device `ordinal` with every part built from `config` alone, not the process's: its cache path,
  /// its own disk cache for the writable folder, the remote tier, KILN_ARCH and KILN_PREFETCH
  /// (docs/configuration.md#one-configuration-per-service).
  InternalService(int ordinal, const Config& config);
  /// The same on the driver `api` (a fake driver's), which must outlive the service.
  InternalService(const driver::DriverApi& api, int ordinal, const Config& config);
  /// An explicit disk cache and compiler.
  InternalService(int ordinal, std::shared_ptr<DiskCache> disk, Compiler compiler);
  /// An explicit backend (a fake driver's) and disk cache.
  InternalService(std::unique_ptr<CudaBackend> backend, std::shared_ptr<DiskCache> disk);

  /// This device's backend (src/runtime/cuda_backend.hpp).
  CudaBackend& backend() noexcept;
  /// The disk cache its modules come from (src/cache/disk/disk_cache.hpp).
  const std::shared_ptr<DiskCache>& disk() const noexcept;

 private:
  static std::unique_ptr<Parts> parts_for(const driver::DriverApi& api, int ordinal, const Config& config);
};

}  // namespace kiln

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

class InternalService : public Service {
 public:
  /// As Service(ordinal).
  explicit InternalService(int ordinal = 0);
  /// An explicit disk cache and compiler.
  InternalService(int ordinal, std::shared_ptr<DiskCache> disk, Compiler compiler);
  /// An explicit backend (a fake driver's) and disk cache.
  InternalService(std::unique_ptr<CudaBackend> backend, std::shared_ptr<DiskCache> disk);

  /// This device's backend (src/runtime/cuda_backend.hpp).
  CudaBackend& backend() noexcept;
  /// The disk cache its modules come from (src/cache/disk/disk_cache.hpp).
  const std::shared_ptr<DiskCache>& disk() const noexcept;
};

}  // namespace kiln

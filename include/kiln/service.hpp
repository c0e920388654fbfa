#pragma once
/// @file
/// kiln assembled: the disk cache in front of NVRTC, feeding one CudaBackend per device, and the
/// FP8 quantizer resolved on it. This is what embedders create.
///
/// A Service is one device. Services of one process share one DiskCache (the folder is shared by
/// processes anyway, and sharing the object keeps this process's disk counters in one place).

#include <memory>
#include <mutex>
#include <optional>

#include "kiln/compiler.hpp"
#include "kiln/cuda_backend.hpp"
#include "kiln/disk_cache.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln {

/// The ModuleProvider kiln uses: `disk` (may be disabled) in front of `compiler`. Keys come from
/// the linked NVRTC's version, the target, the compiler's options, the module and every embedded
/// header. Modules read from disk are dumped too when `KILN_DUMP_DIR` is set.
ModuleProvider make_module_provider(std::shared_ptr<DiskCache> disk, Compiler compiler);

/// The cache key of `source` compiled for `target` with `options` by the linked NVRTC.
CacheKey module_cache_key(const KernelSource& source, const Target& target, const std::vector<std::string>& options);

/// The process's disk cache, configured from the environment on first use. Thread-safe.
std::shared_ptr<DiskCache> process_disk_cache();

/// This process's counters: memory-cache counters summed over the given services, disk counters.
struct ServiceCounters {
  ModuleCacheCounters memory;
  DiskCacheCounters disk;
};

class Service {
 public:
  /// Device `ordinal` of the process driver, with the process disk cache and a Compiler reading
  /// KILN_LINEINFO. Without a driver or device the service exists and every handle is 0
  /// (`backend().unavailable_reason()` says why). Throws kiln::Error on a negative ordinal or
  /// one past the device count, and on a bad KILN_ARCH.
  explicit Service(int ordinal = 0);
  /// For tests and tools: explicit disk cache and compiler.
  Service(int ordinal, std::shared_ptr<DiskCache> disk, Compiler compiler);

  CudaBackend& backend() noexcept { return *backend_; }
  const std::shared_ptr<DiskCache>& disk() const noexcept { return disk_; }
  /// The quantizer on this device, resolved on first use (compiles or loads both modules).
  const ops::Fp8ActQuant& fp8_act_quant();
  ServiceCounters counters() const;

 private:
  std::shared_ptr<DiskCache> disk_;
  std::unique_ptr<CudaBackend> backend_;
  std::once_flag fp8_once_;
  ops::Fp8ActQuant fp8_;
};

}  // namespace kiln

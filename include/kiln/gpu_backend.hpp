#pragma once
/// @file
/// The interface ops use to reach one GPU: device facts, kernel handles, launches.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/export.hpp"
#include "kiln/kernel_handle.hpp"
#include "kiln/target.hpp"

namespace kiln {

/// Grid or block extents without CUDA runtime headers.
struct Dim3 {
  std::uint32_t x = 1;
  std::uint32_t y = 1;
  std::uint32_t z = 1;
};

/// How one launch is ordered against the work before it on its stream.
struct LaunchOptions {
  /// Programmatic dependent launch (PDL, sm_90 and later): the kernel may be scheduled while the
  /// previous kernel on the stream is still finishing, hiding launch latency between small
  /// kernels. Only for kernels that execute `griddepcontrol.wait` before touching memory (every
  /// kiln quantizer does): that wait gives them the stream order back. Ignored (a plain launch)
  /// on older GPUs and drivers without cuLaunchKernelEx, where the result is the same.
  bool programmatic_dependent = false;
};

/// One device as the driver reports it.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  ComputeCapability cc;
  std::uint32_t sm_count = 0;
  // What the quantizer's pick weighs (ops::quant_prefers_shared); 0 when the driver did not say.
  std::uint32_t clock_khz = 0;         ///< SM clock, kHz
  std::uint32_t memory_clock_khz = 0;  ///< memory clock, kHz
  std::uint32_t memory_bus_bits = 0;   ///< global memory bus width, bits
};

/// One backend per device. Every member is safe to call from many threads.
// Why KILN_API: its type info is the library's, so dynamic_cast works across the library boundary.
class KILN_API GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  virtual const DeviceInfo& device() const = 0;
  /// The target this device's modules are compiled for, or nothing when none works (the reason is
  /// in the log and in `kiln info`).
  virtual const std::optional<Target>& target() const = 0;

  /// The handle of `entry` in `module`, compiling and loading the module on first use; 0 when the
  /// module or entry does not exist, does not compile, or cannot load. Never throws.
  virtual KernelHandle try_kernel(std::string_view module, std::string_view entry) = 0;
  /// As try_kernel, but 0 without compiling anything when this device's target does not carry the
  /// module's family (the Hopper twin on a non-Hopper GPU).
  virtual KernelHandle try_target_kernel(std::string_view module, std::string_view entry) = 0;

  /// Launch `kernel` on the caller's `stream` (a CUstream; nullptr is the legacy default stream).
  /// `args` is the driver's kernel-parameter array. Throws kiln::Error on a handle this backend did
  /// not return, a zero handle, or a driver failure.
  virtual void launch(KernelHandle kernel, Dim3 grid, Dim3 block, std::uint32_t shared_bytes,
                      void* stream, void** args, LaunchOptions options) = 0;
  /// `launch` in stream order (no PDL).
  void launch(KernelHandle kernel, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, void* stream, void** args) {
    launch(kernel, grid, block, shared_bytes, stream, args, LaunchOptions{});
  }
};

/// The original design's free-function forms.
inline KernelHandle try_kernel(GpuBackend& gpu, std::string_view module, std::string_view entry) {
  return gpu.try_kernel(module, entry);
}
inline KernelHandle try_target_kernel(GpuBackend& gpu, std::string_view module, std::string_view entry) {
  return gpu.try_target_kernel(module, entry);
}

}  // namespace kiln

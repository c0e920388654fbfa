#pragma once
// A GpuBackend that records launches instead of running them, for CPU tests of op launch paths.

#include <vector>

#include "kiln/gpu_backend.hpp"

namespace kiln::test {

struct RecordedLaunch {
  KernelHandle kernel;
  Dim3 grid;
  Dim3 block;
  std::uint32_t shared_bytes;
  void* stream;
  // Copied during launch: the argument array lives in the caller's frame only for the call.
  const void* x;
  const void* q;
  const void* scales;
  std::uint32_t k;
  LaunchOptions options;
};

class RecordingBackend : public GpuBackend {
 public:
  explicit RecordingBackend(std::uint32_t sm_count) { info_.sm_count = sm_count; }

  const DeviceInfo& device() const override { return info_; }
  const std::optional<Target>& target() const override { return target_; }
  KernelHandle try_kernel(std::string_view, std::string_view) override { return {}; }
  KernelHandle try_target_kernel(std::string_view, std::string_view) override { return {}; }
  using GpuBackend::launch;
  void launch(KernelHandle kernel, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, void* stream, void** args,
              LaunchOptions options) override {
    launches.push_back({kernel, grid, block, shared_bytes, stream, *static_cast<const void* const*>(args[0]),
                        *static_cast<const void* const*>(args[1]), *static_cast<const void* const*>(args[2]),
                        *static_cast<const std::uint32_t*>(args[3]), options});
  }

  std::vector<RecordedLaunch> launches;

 private:
  DeviceInfo info_;
  std::optional<Target> target_;
};

}  // namespace kiln::test

#pragma once
// Device memory for GPU tests and the benchmark: allocation, copies and fills through kiln's driver
// table, in the device's primary context.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "driver/driver_api.hpp"
#include "driver/driver_check.hpp"
#include "driver/primary_context.hpp"

namespace kiln::test {

class DeviceBuffer {
 public:
  DeviceBuffer(const driver::PrimaryContext& context, std::size_t bytes) : context_(context), bytes_(bytes) {
    const driver::ScopedCurrent current(context_);
    driver::check(api(), api().cuMemAlloc_v2(&pointer_, bytes_ == 0 ? 1 : bytes_), "cuMemAlloc");
  }
  ~DeviceBuffer() {
    const driver::ScopedCurrent current(context_);
    api().cuMemFree_v2(pointer_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const noexcept { return reinterpret_cast<void*>(pointer_); }
  std::size_t bytes() const noexcept { return bytes_; }

  void upload(const void* host, std::size_t bytes) {
    const driver::ScopedCurrent current(context_);
    driver::check(api(), api().cuMemcpyHtoD_v2(pointer_, host, bytes), "cuMemcpyHtoD");
  }
  void download(void* host, std::size_t bytes) const {
    const driver::ScopedCurrent current(context_);
    driver::check(api(), api().cuMemcpyDtoH_v2(host, pointer_, bytes), "cuMemcpyDtoH");
  }
  void fill(std::uint8_t byte) {
    const driver::ScopedCurrent current(context_);
    driver::check(api(), api().cuMemsetD8_v2(pointer_, byte, bytes_), "cuMemsetD8");
  }

 private:
  const driver::DriverApi& api() const noexcept { return context_.api(); }
  const driver::PrimaryContext& context_;
  std::size_t bytes_;
  CUdeviceptr pointer_ = 0;
};

inline void synchronize(const driver::PrimaryContext& context) {
  const driver::ScopedCurrent current(context);
  driver::check(context.api(), context.api().cuCtxSynchronize(), "cuCtxSynchronize");
}

}  // namespace kiln::test

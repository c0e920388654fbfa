#include "driver/primary_context.hpp"

#include "base/log.hpp"
#include "driver/driver_check.hpp"

namespace kiln::driver {

PrimaryContext::PrimaryContext(const DriverApi& api, int ordinal) : api_(api), ordinal_(ordinal) {
  check(api_, api_.cuDeviceGet(&device_, ordinal), "cuDeviceGet");
  check(api_, api_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
}

PrimaryContext::~PrimaryContext() {
  const CUresult result = api_.cuDevicePrimaryCtxRelease_v2(device_);
  if (result != CUDA_SUCCESS)
    logger().warn("device {}: {}", ordinal_, driver_error_message(api_, result, "cuDevicePrimaryCtxRelease"));
}

bool primary_context_active(const DriverApi& api, int ordinal) {
  CUdevice device = 0;
  check(api, api.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  unsigned flags = 0;
  int active = 0;
  check(api, api.cuDevicePrimaryCtxGetState(device, &flags, &active), "cuDevicePrimaryCtxGetState");
  return active != 0;
}

ScopedCurrent::ScopedCurrent(const PrimaryContext& context) : api_(context.api()) {
  CUcontext current = nullptr;
  check(api_, api_.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current == context.get()) return;
  check(api_, api_.cuCtxPushCurrent_v2(context.get()), "cuCtxPushCurrent");
  pushed_ = true;
}

ScopedCurrent::~ScopedCurrent() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  const CUresult result = api_.cuCtxPopCurrent_v2(&popped);
  if (result != CUDA_SUCCESS) logger().warn("{}", driver_error_message(api_, result, "cuCtxPopCurrent"));
}

}  // namespace kiln::driver

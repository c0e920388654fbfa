#include "driver/devices.hpp"

#include <array>

#include "driver/driver_check.hpp"

namespace kiln::driver {

namespace {

int attribute(const DriverApi& api, CUdevice device, CUdevice_attribute which) {
  int value = 0;
  check(api, api.cuDeviceGetAttribute(&value, which, device), "cuDeviceGetAttribute");
  return value;
}

// Why not checked: the pick's device rule only reads these, and 0 (unknown) makes it take the
// family kernel, which is right on every GPU measured; a driver that lacks one must not make the
// device unusable.
std::uint32_t figure(const DriverApi& api, CUdevice device, CUdevice_attribute which) {
  int value = 0;
  return api.cuDeviceGetAttribute(&value, which, device) == CUDA_SUCCESS && value > 0 ? static_cast<std::uint32_t>(value)
                                                                                      : 0;
}

}  // namespace

int device_count(const DriverApi& api) {
  int count = 0;
  check(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount");
  return count;
}

DeviceInfo device_info(const DriverApi& api, int ordinal) {
  CUdevice device = 0;
  check(api, api.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  std::array<char, 256> name{};
  check(api, api.cuDeviceGetName(name.data(), static_cast<int>(name.size()), device), "cuDeviceGetName");
  name.back() = '\0';  // Why: the driver truncates long names without promising a terminator.

  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = name.data();
  info.cc.major = attribute(api, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc.minor = attribute(api, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = static_cast<std::uint32_t>(attribute(api, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  info.clock_khz = figure(api, device, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  info.memory_clock_khz = figure(api, device, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  info.memory_bus_bits = figure(api, device, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  return info;
}

std::vector<DeviceInfo> devices(const DriverApi& api) {
  std::vector<DeviceInfo> all;
  const int count = device_count(api);
  all.reserve(static_cast<std::size_t>(count));
  for (int ordinal = 0; ordinal < count; ++ordinal) all.push_back(device_info(api, ordinal));
  return all;
}

}  // namespace kiln::driver

namespace kiln::driver {

GpuScan scan_gpus(const DriverApi& api) {
  GpuScan scan;
  scan.state = api.state();
  if (scan.state != DriverState::ok) {
    scan.reason = api.load_error;
    return scan;
  }
  try {
    scan.devices = devices(api);
  } catch (const std::exception& error) {
    scan.state = DriverState::unusable;
    scan.reason = error.what();
    scan.devices.clear();
    return scan;
  }
  if (scan.devices.empty()) {
    scan.state = DriverState::unusable;
    scan.reason = "the NVIDIA driver is loaded but reports no CUDA device";
  }
  return scan;
}

}  // namespace kiln::driver

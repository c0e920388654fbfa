#pragma once
/// @file
/// The devices a driver reports, as kiln's DeviceInfo.

#include <string>
#include <vector>

#include "driver/driver_api.hpp"
#include "kiln/gpu_backend.hpp"

namespace kiln::driver {

/// cuDeviceGetCount. `api` must be loaded; throws kiln::Error on a driver failure.
int device_count(const DriverApi& api);

/// Name, compute capability and SM count of device `ordinal`. `api` must be loaded; throws
/// kiln::Error on a driver failure (an ordinal the driver does not know included).
DeviceInfo device_info(const DriverApi& api, int ordinal);

/// Every device, by ordinal. Throws as device_info.
std::vector<DeviceInfo> devices(const DriverApi& api);

/// Whether GPU work can run, for the GPU suite and `kiln selftest`, which skip only on no_driver
/// and fail on anything else that is not ok: a GPU machine whose driver kiln cannot use must not
/// look like a machine without a GPU.
struct GpuScan {
  DriverState state = DriverState::no_driver;  ///< ok: at least one device, every one readable
  std::string reason;                          ///< why not ok; empty when ok
  std::vector<DeviceInfo> devices;
};

/// `api`'s state, then its devices: a driver call that fails, or a driver that reports no device,
/// is unusable (a working driver without a GPU is a broken GPU machine, not a CPU one). Driver
/// errors are reported in the result, never thrown.
GpuScan scan_gpus(const DriverApi& api);

}  // namespace kiln::driver

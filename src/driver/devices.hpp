#pragma once
/// @file
/// The devices a driver reports, as kiln's DeviceInfo.

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

}  // namespace kiln::driver

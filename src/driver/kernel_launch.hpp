#pragma once
/// @file
/// One kernel launch through the driver table, in stream order or with programmatic dependent
/// launch (PDL): the one place that builds cuLaunchKernelEx's attribute, for the library's
/// backend and the benchmark's raw launches alike.

#include <cuda.h>

#include <cstdint>

#include "driver/driver_api.hpp"
#include "kiln/gpu_backend.hpp"

namespace kiln::driver {

/// cuLaunchKernel, or, when `dependent`, cuLaunchKernelEx with programmatic stream serialization
/// allowed (the caller checks that the driver has cuLaunchKernelEx and the device is sm_90+).
/// Returns the driver's result unchanged.
CUresult launch_kernel(const DriverApi& api, CUfunction function, Dim3 grid, Dim3 block, std::uint32_t shared_bytes,
                       CUstream stream, void** args, bool dependent);

/// The name of the call `launch_kernel` makes, for error messages.
inline const char* launch_call_name(bool dependent) { return dependent ? "cuLaunchKernelEx" : "cuLaunchKernel"; }

}  // namespace kiln::driver

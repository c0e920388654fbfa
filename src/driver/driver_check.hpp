#pragma once
/// @file
/// Turning a driver result into words and into kiln::Error. Every driver call goes through
/// `check` (or, where the caller must keep going, through `driver_error_message`).

#include <string>
#include <vector>

#include "driver/driver_api.hpp"
#include "kiln/error.hpp"

namespace kiln::driver {

/// `CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)`; `CUresult 999 (unknown)` when the
/// driver has no name for it or the table lacks cuGetErrorName.
std::string result_text(const DriverApi& api, CUresult result);

/// `cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)`.
std::string driver_error_message(const DriverApi& api, CUresult result, const char* call);

/// Throws kiln::Error of kind driver with `driver_error_message`, `context.call = call` and
/// `context.result = result`. The retry is `context.retry` (transient unless the caller knows the
/// failure recurs, as a missing entry does).
[[noreturn]] void throw_driver_error(const DriverApi& api, CUresult result, const char* call,
                                     ErrorContext context = {});

/// Throws kiln::Error (unavailable, permanent) unless `api` holds every entry in `symbols`
/// (optional entries may be null):
/// "the NVIDIA driver (12.4) is too old for <purpose>: libcuda.so.1 lacks cuEventElapsedTime_v2".
/// Callers of optional entries call it before their first use.
void require_entries(const DriverApi& api, const std::vector<const char*>& symbols, const std::string& purpose);

/// Throws (as throw_driver_error) unless `result` is CUDA_SUCCESS.
inline void check(const DriverApi& api, CUresult result, const char* call) {
  if (result != CUDA_SUCCESS) throw_driver_error(api, result, call);
}

}  // namespace kiln::driver

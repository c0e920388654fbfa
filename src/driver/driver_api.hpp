#pragma once
/// @file
/// The CUDA Driver API as a table of function pointers, loaded at run time from `libcuda.so.1`.
/// kiln never links libcuda, so the library loads and runs its CPU paths on machines without a
/// driver. Internal header: `<cuda.h>` supplies the types and enums only.
///
/// Each entry is named after the exact symbol resolved with dlsym: the versioned name `<cuda.h>`
/// maps the plain one to (`cuCtxPushCurrent` -> `cuCtxPushCurrent_v2`), so a call through the table
/// has the same ABI as a call through the header. `cuLaunchKernel` is the legacy-default-stream
/// symbol: kiln launches on the caller's stream, and a null stream means the legacy one.
///
/// Tests build their own table (tests/fake_driver.hpp) and pass it wherever a `DriverApi` is
/// taken; `driver_api()` is only the default.

#include <cuda.h>

#include <memory>
#include <optional>
#include <string>

#include "kiln/target.hpp"

namespace kiln::driver {

/// Every entry point kiln uses, once, for the table's members and the loader's dlsym list.
#define KILN_DRIVER_ENTRY_POINTS(X) \
  X(cuGetErrorName)                 \
  X(cuGetErrorString)               \
  X(cuInit)                         \
  X(cuDriverGetVersion)             \
  X(cuDeviceGetCount)               \
  X(cuDeviceGet)                    \
  X(cuDeviceGetName)                \
  X(cuDeviceGetAttribute)           \
  X(cuDevicePrimaryCtxRetain)       \
  X(cuDevicePrimaryCtxGetState)     \
  X(cuDevicePrimaryCtxRelease_v2)   \
  X(cuCtxGetCurrent)                \
  X(cuCtxPushCurrent_v2)            \
  X(cuCtxPopCurrent_v2)             \
  X(cuModuleLoadDataEx)             \
  X(cuModuleUnload)                 \
  X(cuModuleGetFunction)            \
  X(cuLaunchKernel)

/// Memory, streams, events and graphs: used by the GPU tests, the benchmark and the CLI's GPU
/// check, not by the module path (so test fakes may leave them null).
#define KILN_DRIVER_MEMORY_ENTRY_POINTS(X) \
  X(cuCtxSynchronize)               \
  X(cuMemAlloc_v2)                  \
  X(cuMemFree_v2)                   \
  X(cuMemcpyHtoD_v2)                \
  X(cuMemcpyDtoH_v2)                \
  X(cuMemcpyDtoDAsync_v2)           \
  X(cuMemsetD8_v2)                  \
  X(cuStreamCreate)                 \
  X(cuStreamDestroy_v2)             \
  X(cuStreamSynchronize)            \
  X(cuStreamBeginCapture_v2)        \
  X(cuStreamEndCapture)             \
  X(cuGraphInstantiateWithFlags)    \
  X(cuGraphLaunch)                  \
  X(cuGraphExecDestroy)             \
  X(cuGraphDestroy)                 \
  X(cuEventCreate)                  \
  X(cuEventDestroy_v2)              \
  X(cuEventRecord)                  \
  X(cuEventSynchronize)             \
  X(cuEventElapsedTime_v2)

/// A loaded (or not) driver. Plain data: copying it copies the pointers and shares the library.
struct DriverApi {
#define KILN_DRIVER_MEMBER(symbol) decltype(&::symbol) symbol = nullptr;
  KILN_DRIVER_ENTRY_POINTS(KILN_DRIVER_MEMBER)
  KILN_DRIVER_MEMORY_ENTRY_POINTS(KILN_DRIVER_MEMBER)
#undef KILN_DRIVER_MEMBER

  /// The dlopen handle; dlclose'd when the last copy goes. Null for tables built by tests.
  std::shared_ptr<void> library;
  /// Every entry resolved and `cuInit(0)` succeeded: GPU paths may be used.
  bool loaded = false;
  /// Why `loaded` is false, for people: names the library, the symbol or the failed call.
  std::string load_error;
  /// cuDriverGetVersion, when the library could be opened (even if cuInit then failed).
  std::optional<Version> version;
};

/// Open `library` (a dlopen name or path), resolve every entry and call cuInit(0). Never throws:
/// a failure is a table with `loaded == false` and the reason in `load_error`.
DriverApi load_driver_api(const char* library);

/// The process's driver: `load_driver_api("libcuda.so.1")`, loaded once on first use (thread-safe)
/// and kept for the life of the process. Never throws.
const DriverApi& driver_api();

}  // namespace kiln::driver

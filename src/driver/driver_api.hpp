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
///
/// Only the entries the library itself calls are required: a driver lacking one of them is
/// unusable. The rest (memory, streams, events, graphs) are optional, resolved when present and
/// null when not, so that an older driver (without, say, `cuEventElapsedTime_v2`, new in CUDA 12.8)
/// still runs kiln; their users call `require_entries` first and report what is missing.

#include <cuda.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/target.hpp"

namespace kiln::driver {

/// The entry points the library uses (module loads, contexts, devices, launches), once, for the
/// table's members and the loader's dlsym list. All required.
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

/// Memory, streams, events and graphs: used by the GPU tests, the benchmark and `kiln selftest`;
/// and cuLaunchKernelEx, which the library uses only for PDL launches and does without (a plain
/// launch gives the same result) when a driver before CUDA 12.0 lacks it. Optional: null when the
/// driver lacks them (and in test fakes); callers check with require_entries before use.
#define KILN_DRIVER_MEMORY_ENTRY_POINTS(X) \
  X(cuLaunchKernelEx)               \
  X(cuCtxSynchronize)               \
  X(cuMemAlloc_v2)                  \
  X(cuMemFree_v2)                   \
  X(cuMemGetInfo_v2)                \
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

/// What a process can expect of its driver.
enum class DriverState {
  ok,         ///< loaded: every required entry resolved and cuInit(0) succeeded
  no_driver,  ///< no NVIDIA driver: the library does not exist (dlopen: no such file)
  unusable,   ///< a library is there but kiln cannot use it: it fails to load, lacks a required
              ///< entry, is the toolkit's link stub, or cuInit fails (no device included)
};
std::string_view to_string(DriverState state);

/// A loaded (or not) driver. Plain data: copying it copies the pointers and shares the library.
struct DriverApi {
#define KILN_DRIVER_MEMBER(symbol) decltype(&::symbol) symbol = nullptr;
  KILN_DRIVER_ENTRY_POINTS(KILN_DRIVER_MEMBER)
  KILN_DRIVER_MEMORY_ENTRY_POINTS(KILN_DRIVER_MEMBER)
#undef KILN_DRIVER_MEMBER

  /// The dlopen handle; dlclose'd when the last copy goes. Null for tables built by tests.
  std::shared_ptr<void> library;
  /// Every required entry resolved and `cuInit(0)` succeeded: GPU paths may be used.
  bool loaded = false;
  /// Why `loaded` is false, for people: names the library, the symbol or the failed call.
  std::string load_error;
  /// Why `loaded` is false, for programs: no_driver or unusable (ok once loaded).
  DriverState failure = DriverState::no_driver;
  /// cuDriverGetVersion, when the library could be opened (even if cuInit then failed).
  std::optional<Version> version;
  /// The library's name as given to the loader, for messages; empty for tables built by tests.
  std::string library_name;

  /// ok when loaded, else `failure`. The GPU suite and `kiln selftest` skip only on no_driver.
  DriverState state() const noexcept { return loaded ? DriverState::ok : failure; }
};

/// Open `library` (a dlopen name or path), resolve every entry and call cuInit(0). Never throws:
/// a failure is a table with `loaded == false`, the reason in `load_error` and `failure` saying
/// whether there is no driver at all or one kiln cannot use.
DriverApi load_driver_api(const char* library);

/// The loader after dlopen, for tests: resolves each entry through `lookup` (dlsym in
/// load_driver_api; null means absent), fails on a missing required entry, then reads the
/// version and calls cuInit(0). `library` names the source in messages. Never throws.
DriverApi resolve_driver_api(const std::function<void*(const char* symbol)>& lookup, const std::string& library);

/// The names of the required and of the optional entries, in table order.
const std::vector<const char*>& required_entry_points();
const std::vector<const char*>& optional_entry_points();

/// Whether the table holds the entry `symbol` (a name from either list); false for any other name.
bool has_entry(const DriverApi& api, std::string_view symbol);

/// The process's driver: `load_driver_api("libcuda.so.1")`, loaded once on first use (thread-safe)
/// and kept for the life of the process. Never throws.
const DriverApi& driver_api();

}  // namespace kiln::driver

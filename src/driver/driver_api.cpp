#include "driver/driver_api.hpp"

#include <dlfcn.h>

#include "base/log.hpp"
#include "driver/driver_check.hpp"

namespace kiln::driver {

namespace {

constexpr const char* UNAVAILABLE = "GPU paths are unavailable";

std::string dl_error() {
  const char* text = dlerror();
  return text != nullptr ? text : "no reason given";
}

template <class Function>
bool resolve(void* library, const char* symbol, Function& slot) {
  slot = reinterpret_cast<Function>(dlsym(library, symbol));
  return slot != nullptr;
}

}  // namespace

DriverApi load_driver_api(const char* library) {
  DriverApi api;
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    api.load_error = std::string(library) + " not found (" + dl_error() + "): no NVIDIA driver; " + UNAVAILABLE;
    return api;
  }
  api.library = std::shared_ptr<void>(handle, [](void* opened) { dlclose(opened); });

#define KILN_DRIVER_RESOLVE(symbol)                                                                   \
  if (!resolve(handle, #symbol, api.symbol)) {                                                        \
    api.load_error = std::string(library) + " lacks " #symbol ": the NVIDIA driver is too old; " + UNAVAILABLE; \
    return api;                                                                                       \
  }
  KILN_DRIVER_ENTRY_POINTS(KILN_DRIVER_RESOLVE)
  KILN_DRIVER_MEMORY_ENTRY_POINTS(KILN_DRIVER_RESOLVE)
#undef KILN_DRIVER_RESOLVE

  int version = 0;
  if (api.cuDriverGetVersion(&version) == CUDA_SUCCESS && version > 0)
    api.version = Version{version / 1000, version % 1000 / 10};

  const CUresult init = api.cuInit(0);
  // Why: the stub cannot name its own error, and a toolkit's stubs folder on the library path is
  // a common setup mistake worth saying plainly.
  if (init == CUDA_ERROR_STUB_LIBRARY) {
    api.load_error = std::string(library) + " is the CUDA toolkit's link stub, not an NVIDIA driver "
                     "(cuInit: CUDA_ERROR_STUB_LIBRARY); " + UNAVAILABLE;
    return api;
  }
  if (init != CUDA_SUCCESS) {
    api.load_error = driver_error_message(api, init, "cuInit") + "; " + UNAVAILABLE;
    return api;
  }
  api.loaded = true;
  return api;
}

const DriverApi& driver_api() {
  // Why: never destroyed. Backends held in other static objects may still call into the driver
  // while statics are torn down, and unloading libcuda under live contexts is unsafe.
  static const DriverApi* const process = [] {
    auto* api = new DriverApi(load_driver_api("libcuda.so.1"));
    if (api->loaded)
      logger().debug("CUDA driver {} loaded from libcuda.so.1", api->version ? api->version->str() : "?");
    else
      logger().info("{}", api->load_error);
    return api;
  }();
  return *process;
}

}  // namespace kiln::driver

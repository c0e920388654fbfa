#include "driver/driver_api.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "driver/driver_check.hpp"

namespace kiln::driver {

namespace {

constexpr const char* UNAVAILABLE = "GPU paths are unavailable";

/// dlerror's text without its leading "<library>: ", which the caller's message already names.
std::string dl_error(const std::string& library) {
  const char* text = dlerror();
  std::string out = text != nullptr ? text : "no reason given";
  const std::string prefix = library + ": ";
  if (out.compare(0, prefix.size(), prefix) == 0) out.erase(0, prefix.size());
  return out;
}

/// Whether dlerror's text says the file does not exist: glibc's English words, or strerror(ENOENT)
/// in the process's locale (dlerror translates it when the host program set one).
bool says_no_such_file(const std::string& why) {
  char buffer[256];
  const char* localized = ::strerror_r(ENOENT, buffer, sizeof buffer);  // GNU: returns the text
  return why.find("No such file or directory") != std::string::npos ||
         (localized != nullptr && why.find(localized) != std::string::npos);
}

template <class Function>
void resolve(const std::function<void*(const char*)>& lookup, const char* symbol, Function& slot) {
  slot = reinterpret_cast<Function>(lookup(symbol));
}

DriverApi unusable(DriverApi api, std::string why) {
  api.loaded = false;
  api.failure = DriverState::unusable;
  api.load_error = std::move(why);
  return api;
}

}  // namespace

std::string_view to_string(DriverState state) {
  switch (state) {
    case DriverState::ok: return "ok";
    case DriverState::no_driver: return "no driver";
    case DriverState::unusable: return "driver unusable";
  }
  return "unknown";
}

const std::vector<const char*>& required_entry_points() {
#define KILN_DRIVER_NAME(symbol) #symbol,
  static const std::vector<const char*> names = {KILN_DRIVER_ENTRY_POINTS(KILN_DRIVER_NAME)};
  return names;
}

const std::vector<const char*>& optional_entry_points() {
  static const std::vector<const char*> names = {KILN_DRIVER_MEMORY_ENTRY_POINTS(KILN_DRIVER_NAME)};
#undef KILN_DRIVER_NAME
  return names;
}

bool has_entry(const DriverApi& api, std::string_view symbol) {
#define KILN_DRIVER_HAS(name) \
  if (symbol == #name) return api.name != nullptr;
  KILN_DRIVER_ENTRY_POINTS(KILN_DRIVER_HAS)
  KILN_DRIVER_MEMORY_ENTRY_POINTS(KILN_DRIVER_HAS)
#undef KILN_DRIVER_HAS
  return false;
}

DriverApi resolve_driver_api(const std::function<void*(const char* symbol)>& lookup, const std::string& library) {
  DriverApi api;
  api.library_name = library;
#define KILN_DRIVER_RESOLVE(symbol)                                                                    \
  resolve(lookup, #symbol, api.symbol);                                                                \
  if (api.symbol == nullptr)                                                                           \
    return unusable(std::move(api), library + " lacks " #symbol ": the NVIDIA driver is too old; " + UNAVAILABLE);
  KILN_DRIVER_ENTRY_POINTS(KILN_DRIVER_RESOLVE)
#undef KILN_DRIVER_RESOLVE
  // Why optional: only the benchmark, the GPU tests and `kiln selftest` call these, and they say
  // what is missing themselves (require_entries); the library runs on a driver without them.
#define KILN_DRIVER_RESOLVE_OPTIONAL(symbol)                                        \
  resolve(lookup, #symbol, api.symbol);                                             \
  if (api.symbol == nullptr) logger().debug("{} lacks {} (optional)", library, #symbol);
  KILN_DRIVER_MEMORY_ENTRY_POINTS(KILN_DRIVER_RESOLVE_OPTIONAL)
#undef KILN_DRIVER_RESOLVE_OPTIONAL

  int version = 0;
  if (api.cuDriverGetVersion(&version) == CUDA_SUCCESS && version > 0)
    api.version = Version{version / 1000, version % 1000 / 10};

  const CUresult init = api.cuInit(0);
  // Why: the stub cannot name its own error, and a toolkit's stubs folder on the library path is
  // a common setup mistake worth saying plainly.
  if (init == CUDA_ERROR_STUB_LIBRARY)
    return unusable(std::move(api), library + " is the CUDA toolkit's link stub, not an NVIDIA driver "
                                              "(cuInit: CUDA_ERROR_STUB_LIBRARY); " + UNAVAILABLE);
  if (init != CUDA_SUCCESS) return unusable(std::move(api), driver_error_message(api, init, "cuInit") + "; " + UNAVAILABLE);
  api.loaded = true;
  api.failure = DriverState::ok;
  return api;
}

DriverApi load_driver_api(const char* library) {
  const std::string name = library;
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const std::string why = dl_error(name);
    DriverApi api;
    api.library_name = name;
    // Why two states: no file means no NVIDIA driver on this machine (GPU tests skip); a file that
    // does not load (wrong architecture, a missing dependency, no permission) is a broken install
    // on what may be a GPU machine, which must not pass for "no GPU".
    if (says_no_such_file(why)) {
      api.failure = DriverState::no_driver;
      api.load_error = name + " not found: " + why + "; no NVIDIA driver; " + UNAVAILABLE;
    } else {
      api.failure = DriverState::unusable;
      api.load_error = name + " cannot be loaded: " + why + "; " + UNAVAILABLE;
    }
    return api;
  }
  std::shared_ptr<void> opened(handle, [](void* library_handle) { dlclose(library_handle); });
  DriverApi api = resolve_driver_api([handle](const char* symbol) { return dlsym(handle, symbol); }, name);
  api.library = std::move(opened);
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

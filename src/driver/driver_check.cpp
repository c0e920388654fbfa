#include "driver/driver_check.hpp"

namespace kiln::driver {

std::string result_text(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  // Why: for a code it does not know the driver returns CUDA_ERROR_INVALID_VALUE and leaves the
  // pointer alone, so both the result and the pointer are checked.
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr)
    return "CUresult " + std::to_string(static_cast<int>(result)) + " (unknown)";
  if (api.cuGetErrorString == nullptr || api.cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr)
    return name;
  return std::string(name) + " (" + text + ")";
}

std::string driver_error_message(const DriverApi& api, CUresult result, const char* call) {
  return std::string(call) + " failed: " + result_text(api, result);
}

void require_entries(const DriverApi& api, const std::vector<const char*>& symbols, const std::string& purpose) {
  std::string missing;
  for (const char* symbol : symbols)
    if (!has_entry(api, symbol)) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  if (missing.empty()) return;
  const std::string version = api.version ? " (" + api.version->str() + ")" : "";
  const std::string library = api.library_name.empty() ? "the driver table" : api.library_name;
  // Why permanent: the process keeps the driver it loaded.
  throw_error(ErrorKind::unavailable, Retry::permanent,
              "the NVIDIA driver" + version + " is too old for " + purpose + ": " + library + " lacks " + missing);
}

void throw_driver_error(const DriverApi& api, CUresult result, const char* call, ErrorContext context) {
  context.call = call;
  context.result = static_cast<int>(result);
  context.kind = ErrorKind::driver;
  throw_error(driver_error_message(api, result, call), std::move(context));
}

}  // namespace kiln::driver

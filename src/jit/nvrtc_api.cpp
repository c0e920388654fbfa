#include "jit/nvrtc_api.hpp"

#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include <unistd.h>

#include <cuda.h>

#include <algorithm>
#include <atomic>

#include "base/config.hpp"
#include "base/env.hpp"
#include "base/log.hpp"
#include "kiln/error.hpp"

#ifndef KILN_NVRTC_TOOLKIT_LIB
#define KILN_NVRTC_TOOLKIT_LIB "/usr/local/cuda/lib64"
#endif

namespace kiln {

namespace {

// Why CUDA_VERSION: the headers kiln is built with name the NVRTC major whose ABI it calls.
const std::string nvrtc_soname = "libnvrtc.so." + std::to_string(CUDA_VERSION / 1000);

bool is_file(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

// Where the nvidia-cuda-nvrtc wheel puts NVRTC inside site-packages: CUDA 13's wheel, then CUDA 12's.
constexpr const char* wheel_lib_folders[] = {"/nvidia/cu13/lib", "/nvidia/cuda_nvrtc/lib"};

/// The file holding the kiln code that runs: the program, which links kiln statically, or libkiln.so.
/// Empty when the loader cannot say.
std::string kiln_code_file() {
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(&kiln_code_file), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr)
    return {};
  // Why /proc/self/exe for the program: the loader knows it only by argv[0], maybe relative or bare.
  const char* name = map->l_name[0] != '\0' ? map->l_name : "/proc/self/exe";
  char resolved[PATH_MAX];
  return ::realpath(name, resolved) != nullptr ? std::string(resolved) : std::string();
}

/// Folders the nvidia-cuda-nvrtc wheel installs into, for the Python running this process.
std::vector<std::string> python_wheel_folders() {
  // Why this symbol: it exists exactly when the process embeds (or is) a Python interpreter.
  if (dlsym(RTLD_DEFAULT, "Py_IsInitialized") == nullptr) return {};
  std::vector<std::string> prefixes;
  const Config& config = process_config();
  for (const auto& value : {config.virtual_env, config.conda_prefix})
    if (value) prefixes.push_back(*value);
  char exe[4096];
  if (const ssize_t size = ::readlink("/proc/self/exe", exe, sizeof exe - 1); size > 0) {
    std::string path(exe, static_cast<std::size_t>(size));
    for (int up = 0; up < 2 && path.rfind('/') != std::string::npos; ++up) path.erase(path.rfind('/'));
    if (!path.empty()) prefixes.push_back(path);
  }
  if (config.home) prefixes.push_back(*config.home + "/.local");  // pip install --user
  std::vector<std::string> folders;
  for (const auto& prefix : prefixes) {
    // Why both: Debian's pip installs into dist-packages, every other Python into site-packages.
    for (const char* packages : {"/lib/python3*/site-packages", "/lib/python3*/dist-packages",
                                 "/local/lib/python3*/dist-packages"}) {
      for (const char* lib : wheel_lib_folders) {
        const std::string pattern = prefix + packages + lib;
        glob_t found{};
        if (::glob(pattern.c_str(), 0, nullptr, &found) == 0)
          for (std::size_t i = 0; i < found.gl_pathc; ++i) folders.emplace_back(found.gl_pathv[i]);
        ::globfree(&found);
      }
    }
  }
  return folders;
}

NvrtcApi not_loaded(NvrtcApi api, std::string why) {
  api.loaded = false;
  api.load_error = std::move(why);
  return api;
}

}  // namespace

std::string NvrtcApi::error_text(nvrtcResult result) const {
  const char* text = nvrtcGetErrorString != nullptr ? nvrtcGetErrorString(result) : nullptr;
  return text != nullptr ? text : "NVRTC error " + std::to_string(static_cast<int>(result));
}

NvrtcApi resolve_nvrtc_api(const std::function<void*(const char* symbol)>& lookup, const std::string& library) {
  NvrtcApi api;
  api.path = library;
#define KILN_NVRTC_RESOLVE(symbol)                                          \
  api.symbol = reinterpret_cast<decltype(api.symbol)>(lookup(#symbol));     \
  if (api.symbol == nullptr) return not_loaded(std::move(api), library + " lacks " #symbol ": not a usable NVRTC");
  KILN_NVRTC_ENTRY_POINTS(KILN_NVRTC_RESOLVE)
#undef KILN_NVRTC_RESOLVE
  Version version;
  if (const nvrtcResult result = api.nvrtcVersion(&version.major, &version.minor); result != NVRTC_SUCCESS)
    return not_loaded(std::move(api), library + ": nvrtcVersion failed: " + api.error_text(result));
  api.version = version;
  api.loaded = true;
  return api;
}

NvrtcApi load_nvrtc_api(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    NvrtcApi api;
    api.path = path;
    const char* why = dlerror();
    return not_loaded(std::move(api), "NVRTC (" + path + ") cannot be loaded: " + (why != nullptr ? why : "no reason given"));
  }
  std::shared_ptr<void> opened(handle, [](void* library) { dlclose(library); });
  NvrtcApi api = resolve_nvrtc_api([handle](const char* symbol) { return dlsym(handle, symbol); }, path);
  api.library = std::move(opened);
  return api;
}

std::optional<NvrtcLocation> find_nvrtc(const NvrtcSearch& search, std::string* why_none) {
  const auto none = [&](std::string why) -> std::optional<NvrtcLocation> {
    if (why_none != nullptr) *why_none = std::move(why);
    return std::nullopt;
  };
  if (search.override_library) {
    const std::string& wanted = *search.override_library;
    if (wanted.find('/') != std::string::npos) {
      if (is_file(wanted)) return NvrtcLocation{wanted, "KILN_NVRTC_LIBRARY"};
      return none("KILN_NVRTC_LIBRARY=" + wanted + " is not a readable file");
    }
    for (const auto& folder : search.library_path)
      if (is_file(folder + "/" + wanted)) return NvrtcLocation{folder + "/" + wanted, "KILN_NVRTC_LIBRARY"};
    return none("KILN_NVRTC_LIBRARY=" + wanted + " is in no folder of LD_LIBRARY_PATH");
  }
  if (!search.toolkit_library.empty() && is_file(search.toolkit_library))
    return NvrtcLocation{search.toolkit_library, "toolkit"};
  for (const auto& folder : search.library_path)
    if (is_file(folder + "/" + search.soname)) return NvrtcLocation{folder + "/" + search.soname, "LD_LIBRARY_PATH"};
  for (const auto& folder : search.wheel_folders)
    if (is_file(folder + "/" + search.soname)) return NvrtcLocation{folder + "/" + search.soname, "python wheel"};
  std::string tried = "no " + search.soname + " in the toolkit (" + search.toolkit_library +
                      "), LD_LIBRARY_PATH or the nvidia-cuda-nvrtc wheel (";
  for (std::size_t i = 0; i < search.wheel_folders.size(); ++i) tried += (i == 0 ? "" : ", ") + search.wheel_folders[i];
  return none(tried + "); set KILN_NVRTC_LIBRARY to its path, or pip install nvidia-cuda-nvrtc");
}

NvrtcSearch process_nvrtc_search() {
  NvrtcSearch search;
  const Config& config = process_config();
  search.override_library = config.nvrtc_library;
  search.soname = nvrtc_soname;
  search.toolkit_library = std::string(KILN_NVRTC_TOOLKIT_LIB) + "/" + nvrtc_soname;
  if (config.ld_library_path) search.library_path = split_path_list(*config.ld_library_path);
  if (!search.override_library) {
    if (const std::string code = kiln_code_file(); !code.empty()) search.wheel_folders = wheel_folders_beside(code);
    for (auto& folder : python_wheel_folders())
      if (std::find(search.wheel_folders.begin(), search.wheel_folders.end(), folder) == search.wheel_folders.end())
        search.wheel_folders.push_back(std::move(folder));
  }
  return search;
}

std::vector<std::string> wheel_folders_beside(const std::string& code_file) {
  const std::size_t folder_end = code_file.rfind('/');
  if (folder_end == std::string::npos || folder_end == 0) return {};
  const std::size_t site_end = code_file.rfind('/', folder_end - 1);
  if (site_end == std::string::npos) return {};
  std::vector<std::string> folders;
  for (const char* lib : wheel_lib_folders) folders.push_back(code_file.substr(0, site_end) + lib);
  return folders;
}

namespace {

struct ProcessLocation {
  std::optional<NvrtcLocation> location;
  std::string absence;
};

const ProcessLocation& process_location() {
  static const ProcessLocation found = [] {
    ProcessLocation out;
    out.location = find_nvrtc(process_nvrtc_search(), &out.absence);
    if (out.location)
      logger().debug("NVRTC: {} (from {})", out.location->path, out.location->source);
    else
      logger().debug("no NVRTC: {}", out.absence);
    return out;
  }();
  return found;
}

std::atomic<bool> load_attempted{false};

}  // namespace

const std::optional<NvrtcLocation>& nvrtc_location() { return process_location().location; }
const std::string& nvrtc_absence() { return process_location().absence; }

const NvrtcApi& nvrtc_api() {
  // Why never destroyed: compiles may still run on other threads while statics are torn down.
  static const NvrtcApi* const process = [] {
    load_attempted = true;
    const auto& location = nvrtc_location();
    if (!location) {
      auto* api = new NvrtcApi();
      api->load_error = "no NVRTC: " + nvrtc_absence();
      return api;
    }
    auto* api = new NvrtcApi(load_nvrtc_api(location->path));
    if (api->loaded)
      logger().debug("NVRTC {} loaded from {}", api->version->str(), api->path);
    else
      logger().warn("{}", api->load_error);
    return api;
  }();
  return *process;
}

bool nvrtc_load_attempted() noexcept { return load_attempted.load(); }

const NvrtcApi& require_nvrtc(const std::string& what) {
  const NvrtcApi& api = nvrtc_api();
  // Why permanent: the process loads NVRTC once, so a missing one stays missing.
  if (!api.loaded)
    throw_error(ErrorKind::unavailable, Retry::permanent, what + " needs NVRTC: " + api.load_error,
                {"nvrtc_api", {}, {}, {}, {}});
  return api;
}

bool jit_enabled() { return current_config().jit; }

}  // namespace kiln

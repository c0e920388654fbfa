#pragma once
/// @file
/// NVRTC as a table of function pointers, loaded with dlopen on first need (like the driver,
/// src/driver/driver_api.hpp), so a process that finds every kernel in its caches and bundles never
/// loads a compiler, and kiln runs where no NVRTC is installed. Internal header: `<nvrtc.h>`
/// supplies the types and prototypes only; nothing links libnvrtc.
///
/// Where NVRTC comes from (find_nvrtc, worked out without loading anything): `KILN_NVRTC_LIBRARY`
/// when set (only that: a path, or a file name searched in `LD_LIBRARY_PATH`; missing means no
/// NVRTC, never another one), else the toolkit kiln was built against
/// (`<nvrtc_root>/lib64/libnvrtc.so.<major>`), else `libnvrtc.so.<major>` in a folder of
/// `LD_LIBRARY_PATH`, else the `nvidia-cuda-nvrtc` wheel's copy (`nvidia/cu13/lib`, or CUDA 12's
/// `nvidia/cuda_nvrtc/lib`): first in the site-packages kiln's own code is installed in (the folder
/// above the kiln program's or libkiln.so's, as in kiln's wheel: `kiln/kiln`,
/// `.kiln.mesonpy.libs/libkiln.so`), then, when kiln runs inside Python, in the interpreter's
/// (`$VIRTUAL_ENV`, `$CONDA_PREFIX`, the interpreter's prefix, `~/.local`).

#include <nvrtc.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/target.hpp"

namespace kiln {

/// Every NVRTC entry kiln calls. All required: a library lacking one is unusable.
#define KILN_NVRTC_ENTRY_POINTS(X) \
  X(nvrtcGetErrorString)           \
  X(nvrtcVersion)                  \
  X(nvrtcGetNumSupportedArchs)     \
  X(nvrtcGetSupportedArchs)        \
  X(nvrtcCreateProgram)            \
  X(nvrtcCompileProgram)           \
  X(nvrtcDestroyProgram)           \
  X(nvrtcGetProgramLogSize)        \
  X(nvrtcGetProgramLog)            \
  X(nvrtcGetPTXSize)               \
  X(nvrtcGetPTX)                   \
  X(nvrtcGetCUBINSize)             \
  X(nvrtcGetCUBIN)

/// A loaded (or not) NVRTC. Plain data: copies share the library.
struct NvrtcApi {
#define KILN_NVRTC_MEMBER(symbol) decltype(&::symbol) symbol = nullptr;
  KILN_NVRTC_ENTRY_POINTS(KILN_NVRTC_MEMBER)
#undef KILN_NVRTC_MEMBER

  std::shared_ptr<void> library;  ///< the dlopen handle; null for tables built by tests
  bool loaded = false;            ///< every entry resolved and nvrtcVersion answered
  std::string load_error;         ///< why not loaded, naming the library and the step
  std::string path;               ///< the file it was loaded from (for messages and `kiln info`)
  std::optional<Version> version; ///< nvrtcVersion

  /// nvrtcGetErrorString's text, or "NVRTC error <n>" when the table has no such entry.
  std::string error_text(nvrtcResult result) const;
};

/// The loader after dlopen, for tests: resolves each entry through `lookup` (null: absent), fails
/// on a missing one, then asks nvrtcVersion. `library` names the source in messages. Never throws.
NvrtcApi resolve_nvrtc_api(const std::function<void*(const char* symbol)>& lookup, const std::string& library);

/// dlopen `path` (RTLD_NOW | RTLD_LOCAL), then resolve_nvrtc_api. Never throws.
NvrtcApi load_nvrtc_api(const std::string& path);

/// Where NVRTC is, found without loading it.
struct NvrtcLocation {
  std::string path;    ///< an existing file
  std::string source;  ///< "KILN_NVRTC_LIBRARY", "toolkit", "LD_LIBRARY_PATH" or "python wheel"
};

/// What find_nvrtc looks at, so the rule is tested without the process environment.
struct NvrtcSearch {
  std::optional<std::string> override_library;  ///< KILN_NVRTC_LIBRARY
  std::string toolkit_library;                  ///< the build's toolkit copy
  std::vector<std::string> library_path;        ///< LD_LIBRARY_PATH's folders, in order
  std::vector<std::string> wheel_folders;       ///< folders the wheel may be in, in search order
  std::string soname;                           ///< "libnvrtc.so.13"
};

/// The search of the file header above; `why_none` (when given) says what was tried.
std::optional<NvrtcLocation> find_nvrtc(const NvrtcSearch& search, std::string* why_none = nullptr);

/// The process's search inputs (environment, build, where kiln is installed, Python); read on every call.
NvrtcSearch process_nvrtc_search();

/// The wheel's folders in the site-packages holding `code_file` (a file one folder below it, such as
/// `<site-packages>/kiln/kiln`); nothing when the path has no such folder.
std::vector<std::string> wheel_folders_beside(const std::string& code_file);

/// The process's NVRTC location, worked out once (thread-safe); nothing when there is none, and
/// `nvrtc_absence()` then says what was searched.
const std::optional<NvrtcLocation>& nvrtc_location();
const std::string& nvrtc_absence();

/// The process's NVRTC: loaded from nvrtc_location() on first call (thread-safe) and kept for the
/// life of the process. Never throws: `loaded` says whether it can be used.
const NvrtcApi& nvrtc_api();

/// Whether nvrtc_api() has been called (and so NVRTC loaded, or tried), without loading it.
bool nvrtc_load_attempted() noexcept;

/// The loaded NVRTC, or kiln::Error (unavailable, permanent; call "nvrtc_api") saying why there is
/// none (what was searched, or why the library did not load) and that `what` needs it.
const NvrtcApi& require_nvrtc(const std::string& what);

/// `KILN_JIT` (a switch, default on): off means never compile; a kernel in no cache layer is
/// unavailable. Read on every call; a bad value is one warning per process and on.
bool jit_enabled();

}  // namespace kiln

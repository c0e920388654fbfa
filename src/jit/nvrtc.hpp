#pragma once
/// @file
/// Facts about the process's NVRTC (src/jit/nvrtc_api.hpp finds and loads it). Only the identity
/// (nvrtc_build) is known without loading NVRTC; the version and arch list load it.

#include <optional>
#include <string>
#include <vector>

#include "kiln/target.hpp"

namespace kiln {

/// NVRTC's version (nvrtcVersion), e.g. {13, 0}; nothing if there is no usable NVRTC. Loads NVRTC.
std::optional<Version> nvrtc_version();
/// The archs NVRTC can compile for (nvrtcGetSupportedArchs), ascending: 75, 80, ..., 121.
/// Empty if there is no NVRTC or it cannot report them. Loads NVRTC.
std::vector<int> nvrtc_supported_archs();

/// The exact NVRTC build, for cache keys: "build-id <hex>", the GNU build ID of the NVRTC library
/// file kiln would load, read from the file without loading it (so a process that never compiles
/// keys its lookups exactly as the process that compiled did). Where the file has no build ID:
/// NVRTC is loaded and the key names "13.0 <the build lines NVRTC writes into PTX>", failing that
/// "13.0" with one warning. Empty when there is no NVRTC at all: then only bundles, which record
/// the build that made them, can be matched (README "No compiler at run time"). Computed once per
/// process (thread-safe); later calls return the same string.
const std::string& nvrtc_build();

/// The GNU build ID (lowercase hex) of the NVRTC library file kiln finds (nvrtc_location), read
/// from the file without loading it; nothing when there is no NVRTC or the file has none.
std::optional<std::string> nvrtc_library_build_id();

/// The build lines at the top of the PTX NVRTC emits for an empty program, joined with "; ":
/// "Compiler Build ID: CL-36424714; Cuda compilation tools, release 13.0, V13.0.88; Based on
/// NVVM 7.0.1". Nothing (and the failed call logged) when the compile fails or has no such lines,
/// or there is no NVRTC. Loads NVRTC and compiles every call (~60 ms): nvrtc_build caches what it needs.
std::optional<std::string> nvrtc_ptx_build_lines();

}  // namespace kiln

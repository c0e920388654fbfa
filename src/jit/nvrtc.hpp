#pragma once
/// @file
/// Facts about the NVRTC this process linked.

#include <optional>
#include <string>
#include <vector>

#include "kiln/target.hpp"

namespace kiln {

/// NVRTC's version (nvrtcVersion), e.g. {13, 0}; nothing if NVRTC cannot report it.
std::optional<Version> nvrtc_version();
/// The archs NVRTC can compile for (nvrtcGetSupportedArchs), ascending: 75, 80, ..., 121.
/// Empty if NVRTC cannot report them.
std::vector<int> nvrtc_supported_archs();

/// The exact NVRTC build, for cache keys (nvrtcVersion says only "13.0", which two patch releases
/// share although their code generation may differ): "13.0 build-id <hex>", the GNU build ID of
/// the loaded libnvrtc (read from its mapped ELF notes, a few microseconds); where NVRTC has none
/// (linked statically, notes stripped), "13.0 <the build lines NVRTC writes into PTX>", from
/// compiling an empty program once (~60 ms); failing both, "13.0" with one warning. Computed once
/// per process (thread-safe); later calls return the same string.
const std::string& nvrtc_build();

/// The GNU build ID (lowercase hex) of the shared library that holds nvrtcVersion, when that
/// library is NVRTC's own (its file name starts with "libnvrtc"); nothing otherwise.
std::optional<std::string> nvrtc_library_build_id();

/// The build lines at the top of the PTX NVRTC emits for an empty program, joined with "; ":
/// "Compiler Build ID: CL-36424714; Cuda compilation tools, release 13.0, V13.0.88; Based on
/// NVVM 7.0.1". Nothing (and the failed call logged) when the compile fails or has no such lines.
/// Compiles every call (~60 ms): nvrtc_build caches what it needs.
std::optional<std::string> nvrtc_ptx_build_lines();

}  // namespace kiln

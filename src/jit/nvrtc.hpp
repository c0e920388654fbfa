#pragma once
/// @file
/// Facts about the NVRTC this process linked.

#include <optional>
#include <vector>

#include "kiln/target.hpp"

namespace kiln {

/// NVRTC's version (nvrtcVersion), e.g. {13, 0}; nothing if NVRTC cannot report it.
std::optional<Version> nvrtc_version();
/// The archs NVRTC can compile for (nvrtcGetSupportedArchs), ascending: 75, 80, ..., 121.
/// Empty if NVRTC cannot report them.
std::vector<int> nvrtc_supported_archs();

}  // namespace kiln

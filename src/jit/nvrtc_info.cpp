#include <nvrtc.h>

#include <algorithm>

#include "base/log.hpp"
#include "jit/nvrtc.hpp"

namespace kiln {

// Why cached: both answers are fixed for the process, and function-local statics initialise once
// even when many threads ask first at the same time.
std::optional<Version> nvrtc_version() {
  static const std::optional<Version> version = []() -> std::optional<Version> {
    Version v;
    const nvrtcResult result = nvrtcVersion(&v.major, &v.minor);
    if (result != NVRTC_SUCCESS) {
      logger().warn("nvrtcVersion failed: {}", nvrtcGetErrorString(result));
      return std::nullopt;
    }
    return v;
  }();
  return version;
}

std::vector<int> nvrtc_supported_archs() {
  static const std::vector<int> archs = [] {
    int count = 0;
    nvrtcResult result = nvrtcGetNumSupportedArchs(&count);
    if (result != NVRTC_SUCCESS) {
      logger().warn("nvrtcGetNumSupportedArchs failed: {}", nvrtcGetErrorString(result));
      return std::vector<int>{};
    }
    if (count <= 0) return std::vector<int>{};
    std::vector<int> out(static_cast<std::size_t>(count));
    result = nvrtcGetSupportedArchs(out.data());
    if (result != NVRTC_SUCCESS) {
      logger().warn("nvrtcGetSupportedArchs failed: {}", nvrtcGetErrorString(result));
      return std::vector<int>{};
    }
    std::sort(out.begin(), out.end());
    return out;
  }();
  return archs;
}

}  // namespace kiln

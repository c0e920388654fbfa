#include <algorithm>
#include <string_view>

#include "base/log.hpp"
#include "jit/elf_build_id.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"

namespace kiln {

namespace {

/// The build lines of the PTX header: NVRTC starts its PTX with a `//` comment block naming the
/// compiler build, the toolkit release and the NVVM version.
std::string build_lines_of(std::string_view ptx) {
  std::string out;
  while (!ptx.empty() && ptx.substr(0, 2) == "//") {
    const auto end = ptx.find('\n');
    std::string_view line = ptx.substr(2, end == std::string_view::npos ? std::string_view::npos : end - 2);
    ptx.remove_prefix(end == std::string_view::npos ? ptx.size() : end + 1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    if (line.find("Build ID") == std::string_view::npos && line.find("compilation tools") == std::string_view::npos &&
        line.find("Based on") == std::string_view::npos)
      continue;
    if (!out.empty()) out += "; ";
    out += line;
  }
  return out;
}

}  // namespace

std::optional<Version> nvrtc_version() { return nvrtc_api().version; }

std::vector<int> nvrtc_supported_archs() {
  // Why cached: fixed for the process; function-local statics initialise once under concurrency.
  static const std::vector<int> archs = [] {
    const NvrtcApi& api = nvrtc_api();
    if (!api.loaded) return std::vector<int>{};
    int count = 0;
    nvrtcResult result = api.nvrtcGetNumSupportedArchs(&count);
    if (result != NVRTC_SUCCESS) {
      logger().warn("nvrtcGetNumSupportedArchs failed: {}", api.error_text(result));
      return std::vector<int>{};
    }
    if (count <= 0) return std::vector<int>{};
    std::vector<int> out(static_cast<std::size_t>(count));
    result = api.nvrtcGetSupportedArchs(out.data());
    if (result != NVRTC_SUCCESS) {
      logger().warn("nvrtcGetSupportedArchs failed: {}", api.error_text(result));
      return std::vector<int>{};
    }
    std::sort(out.begin(), out.end());
    return out;
  }();
  return archs;
}

std::optional<std::string> nvrtc_library_build_id() {
  const auto& location = nvrtc_location();
  if (!location) return std::nullopt;
  std::string why;
  auto id = elf_file_build_id(location->path, &why);
  if (!id) logger().debug("NVRTC build ID: {}", why);
  return id;
}

std::optional<std::string> nvrtc_ptx_build_lines() {
  const NvrtcApi& api = nvrtc_api();
  if (!api.loaded) return std::nullopt;
  nvrtcProgram program = nullptr;
  nvrtcResult result = api.nvrtcCreateProgram(&program, "", "kiln_nvrtc_build.cu", 0, nullptr, nullptr);
  if (result != NVRTC_SUCCESS) {
    logger().warn("nvrtcCreateProgram failed while reading NVRTC's build: {}", api.error_text(result));
    return std::nullopt;
  }
  std::string ptx;
  result = api.nvrtcCompileProgram(program, 0, nullptr);
  const char* failed = "nvrtcCompileProgram";
  std::size_t size = 0;
  if (result == NVRTC_SUCCESS) {
    failed = "nvrtcGetPTXSize";
    result = api.nvrtcGetPTXSize(program, &size);
  }
  if (result == NVRTC_SUCCESS) {
    failed = "nvrtcGetPTX";
    ptx.resize(size);
    result = api.nvrtcGetPTX(program, ptx.data());
  }
  if (const nvrtcResult destroyed = api.nvrtcDestroyProgram(&program); destroyed != NVRTC_SUCCESS)
    logger().warn("nvrtcDestroyProgram failed: {}", api.error_text(destroyed));
  if (result != NVRTC_SUCCESS) {
    logger().warn("{} failed while reading NVRTC's build: {}", failed, api.error_text(result));
    return std::nullopt;
  }
  std::string lines = build_lines_of(ptx);
  if (lines.empty()) return std::nullopt;
  return lines;
}

const std::string& nvrtc_build() {
  static const std::string build = []() -> std::string {
    if (!nvrtc_location()) return {};
    // Why the file's build ID first: it needs no dlopen, and it names the exact binary, so the
    // version (which would need NVRTC loaded) adds nothing.
    if (auto id = nvrtc_library_build_id()) return "build-id " + *id;
    const auto version = nvrtc_version();
    if (!version) return {};
    if (auto lines = nvrtc_ptx_build_lines()) return version->str() + " " + *lines;
    logger().warn("cannot tell NVRTC's exact build (no build ID, no PTX header); cache keys name NVRTC {} only, so "
                  "another patch release of it would share cached binaries",
                  version->str());
    return version->str();
  }();
  return build;
}

}  // namespace kiln

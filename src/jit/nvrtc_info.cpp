#include <link.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/log.hpp"
#include "jit/nvrtc.hpp"

namespace kiln {

namespace {

/// What dl_iterate_phdr's callback looks for and finds.
struct BuildIdSearch {
  std::uintptr_t address = 0;  // an address inside the wanted object
  bool found = false;          // an object holds `address`
  std::string file;            // its path as the loader knows it ("" for the main program)
  std::optional<std::string> build_id;
};

std::string hex_of(const unsigned char* bytes, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 0xf];
  }
  return out;
}

/// The NT_GNU_BUILD_ID note in one PT_NOTE segment, as mapped in memory.
std::optional<std::string> build_id_in_notes(const unsigned char* notes, std::size_t size, std::size_t align) {
  const auto padded = [align](std::size_t n) { return (n + align - 1) / align * align; };
  std::size_t at = 0;
  while (size - at >= sizeof(ElfW(Nhdr))) {
    ElfW(Nhdr) header;
    std::memcpy(&header, notes + at, sizeof header);
    at += sizeof header;
    const std::size_t name_at = at;
    if (header.n_namesz > size - at || padded(header.n_namesz) > size - at) return std::nullopt;
    at += padded(header.n_namesz);
    if (header.n_descsz > size - at) return std::nullopt;
    const std::size_t desc_at = at;
    at += std::min(padded(header.n_descsz), size - at);
    if (header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 && std::memcmp(notes + name_at, "GNU", 4) == 0 &&
        header.n_descsz > 0)
      return hex_of(notes + desc_at, header.n_descsz);
  }
  return std::nullopt;
}

int find_build_id(dl_phdr_info* info, std::size_t, void* data) {
  auto& search = *static_cast<BuildIdSearch*>(data);
  bool holds = false;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const auto& segment = info->dlpi_phdr[i];
    const std::uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    holds = segment.p_type == PT_LOAD && search.address >= start && search.address - start < segment.p_memsz;
  }
  if (!holds) return 0;
  search.found = true;
  search.file = info->dlpi_name != nullptr ? info->dlpi_name : "";
  for (ElfW(Half) i = 0; i < info->dlpi_phnum && !search.build_id; ++i) {
    const auto& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    // Why 4 unless 8: ELF notes are 4-byte aligned except in segments that say 8 (gnu.property).
    search.build_id = build_id_in_notes(reinterpret_cast<const unsigned char*>(info->dlpi_addr + segment.p_vaddr),
                                        segment.p_memsz, segment.p_align == 8 ? 8 : 4);
  }
  return 1;
}

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

namespace kiln {

std::optional<std::string> nvrtc_library_build_id() {
  BuildIdSearch search;
  search.address = reinterpret_cast<std::uintptr_t>(&nvrtcVersion);
  dl_iterate_phdr(find_build_id, &search);
  if (!search.found) return std::nullopt;
  const auto slash = search.file.rfind('/');
  const std::string_view base = std::string_view(search.file).substr(slash == std::string::npos ? 0 : slash + 1);
  // Why the name check: NVRTC linked statically (or an executable's PLT stub for nvrtcVersion)
  // would give another object's build ID, which names kiln's build, not NVRTC's.
  if (base.substr(0, 8) != "libnvrtc") return std::nullopt;
  return search.build_id;
}

std::optional<std::string> nvrtc_ptx_build_lines() {
  nvrtcProgram program = nullptr;
  nvrtcResult result = nvrtcCreateProgram(&program, "", "kiln_nvrtc_build.cu", 0, nullptr, nullptr);
  if (result != NVRTC_SUCCESS) {
    logger().warn("nvrtcCreateProgram failed while reading NVRTC's build: {}", nvrtcGetErrorString(result));
    return std::nullopt;
  }
  std::string ptx;
  result = nvrtcCompileProgram(program, 0, nullptr);
  const char* failed = "nvrtcCompileProgram";
  std::size_t size = 0;
  if (result == NVRTC_SUCCESS) {
    failed = "nvrtcGetPTXSize";
    result = nvrtcGetPTXSize(program, &size);
  }
  if (result == NVRTC_SUCCESS) {
    failed = "nvrtcGetPTX";
    ptx.resize(size);
    result = nvrtcGetPTX(program, ptx.data());
  }
  if (const nvrtcResult destroyed = nvrtcDestroyProgram(&program); destroyed != NVRTC_SUCCESS)
    logger().warn("nvrtcDestroyProgram failed: {}", nvrtcGetErrorString(destroyed));
  if (result != NVRTC_SUCCESS) {
    logger().warn("{} failed while reading NVRTC's build: {}", failed, nvrtcGetErrorString(result));
    return std::nullopt;
  }
  std::string lines = build_lines_of(ptx);
  if (lines.empty()) return std::nullopt;
  return lines;
}

const std::string& nvrtc_build() {
  static const std::string build = [] {
    const auto version = nvrtc_version();
    const std::string major_minor = version ? version->str() : "unknown";
    if (auto id = nvrtc_library_build_id()) return major_minor + " build-id " + *id;
    if (auto lines = nvrtc_ptx_build_lines()) return major_minor + " " + *lines;
    logger().warn("cannot tell NVRTC's exact build (no build ID, no PTX header); cache keys name NVRTC {} only, so "
                  "another patch release of it would share cached binaries",
                  major_minor);
    return major_minor;
  }();
  return build;
}

}  // namespace kiln

#pragma once
// What the real driver does with an image, over the fake driver: tests that load real CUBINs
// (NVRTC's, or a bundle's) through the fake driver, which runs nothing, use this check in front.

#include <cstdint>
#include <cstring>
#include <vector>

#include "fake_driver.hpp"

namespace kiln::test {

constexpr std::uint16_t EM_CUDA = 190;

/// The SM arch a CUDA ELF image is built for (86 for sm_86), or -1 when the bytes are not one.
int cubin_arch(const void* image) {
  const auto* bytes = static_cast<const std::uint8_t*>(image);
  if (std::memcmp(bytes, "\x7f" "ELF", 4) != 0 || bytes[4] != 2) return -1;
  std::uint16_t machine = 0;
  std::uint32_t flags = 0;
  std::memcpy(&machine, bytes + 18, sizeof machine);
  std::memcpy(&flags, bytes + 48, sizeof flags);
  if (machine != EM_CUDA) return -1;
  // Why two layouts: CUDA ELF ABI version 8 (CUDA 12.8 and later) moved the arch up one byte.
  return static_cast<int>(bytes[8] >= 8 ? (flags >> 8) & 0xff : flags & 0xff);
}

/// What the real driver does with an image, over the fake driver: a CUBIN for the device's arch
/// loads (as a fake image exporting the module's entries, since nothing here runs it), a CUBIN
/// for another arch is CUDA_ERROR_NO_BINARY_FOR_GPU, anything else CUDA_ERROR_INVALID_IMAGE.
struct ImageCheck {
  static inline int device_arch = 90;
  static inline std::vector<std::uint8_t> exported;  ///< the fake image a good CUBIN becomes
  static inline decltype(&::cuModuleLoadDataEx) fake_load = nullptr;

  static CUresult load(CUmodule* module, const void* image, unsigned count, CUjit_option* options, void** values) {
    const int arch = cubin_arch(image);
    if (arch < 0) return CUDA_ERROR_INVALID_IMAGE;
    if (arch != device_arch) return CUDA_ERROR_NO_BINARY_FOR_GPU;
    return fake_load(module, exported.data(), count, options, values);
  }

  static driver::DriverApi api() {
    driver::DriverApi table = FakeDriver::instance().api();
    fake_load = table.cuModuleLoadDataEx;
    table.cuModuleLoadDataEx = load;
    return table;
  }
};

}  // namespace kiln::test

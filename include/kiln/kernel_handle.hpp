#pragma once
/// @file
/// The value callers hold for a loaded kernel.

#include <cstdint>

namespace kiln {

/// A loaded kernel on one device. `raw == 0` means "none": the kernel is unavailable (not in this
/// device's target, no driver, failed compile). A nonzero handle is only meaningful to the backend
/// that returned it; launching it through another backend is refused.
struct KernelHandle {
  std::uint64_t raw = 0;

  constexpr bool loaded() const noexcept { return raw != 0; }
  friend constexpr bool operator==(KernelHandle a, KernelHandle b) noexcept { return a.raw == b.raw; }
  friend constexpr bool operator!=(KernelHandle a, KernelHandle b) noexcept { return a.raw != b.raw; }
};

}  // namespace kiln

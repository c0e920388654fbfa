#pragma once
/// @file
/// The family kernel's division of its CTA index by a row's tile count, as a multiply and a shift.
/// Header-only and free of libkiln so that bench/explore/family_geometry.cu (a standalone nvcc
/// build) makes its divisor with the same code the library launches with.

#include <cstdint>

namespace kiln::ops {

/// floor(n / d) for every n < 2^31 as (n * multiplier) >> shift, with the product in 64 bits: the
/// family kernel divides its CTA index by a row's tile count this way (the kernel's TileDivisor).
struct TileDivisor {
  static constexpr std::uint32_t max_divisor = 0x7FFFFFFFu;
  std::uint32_t multiplier = 0;
  std::uint32_t shift = 0;

  /// d from 1 to max_divisor, or kiln::Error naming the argument (defined in libkiln).
  static TileDivisor of(std::uint32_t d);

  /// of() without its range check, for a d known to be from 1 to max_divisor: shift = 31 +
  /// ceil(log2 d), multiplier = ceil(2^shift / d), below 2^32. Runs on every tiled launch, hence
  /// a count of leading zeros for the logarithm rather than a loop.
  static constexpr TileDivisor of_valid(std::uint32_t d) noexcept {
    const std::uint32_t log2_ceiling = d == 1 ? 0 : 32 - static_cast<std::uint32_t>(__builtin_clz(d - 1));
    // Why exact for every n < 2^31: multiplier = (2^shift + e) / d with 0 <= e < d, so
    // n * multiplier / 2^shift = n / d + n * e / (d * 2^shift), whose second term is below 1 / d,
    // less than what n / d lacks to the next integer.
    const std::uint32_t shift = 31 + log2_ceiling;
    const std::uint64_t multiplier = ((std::uint64_t{1} << shift) + d - 1) / d;
    return {static_cast<std::uint32_t>(multiplier), shift};
  }

  constexpr std::uint32_t divide(std::uint32_t n) const noexcept {
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(n) * multiplier) >> shift);
  }
};

}  // namespace kiln::ops

#pragma once
/// @file
/// kiln's own version.

#include <string_view>

namespace kiln {

/// "0.1.0": the Meson project version the library was built from.
std::string_view version_string() noexcept;

}  // namespace kiln

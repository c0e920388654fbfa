#pragma once
/// @file
/// kiln's own version.

#include <string_view>

#include "kiln/export.hpp"

namespace kiln {

/// "0.1.0": the Meson project version the library was built from.
KILN_API std::string_view version_string() noexcept;

}  // namespace kiln

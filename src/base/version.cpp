#include "kiln/version.hpp"

namespace kiln {

std::string_view version_string() noexcept { return KILN_VERSION; }

}  // namespace kiln

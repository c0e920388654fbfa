// The process-dependent half of target.hpp: KILN_ARCH and `--arch auto`.
#include "kiln/env.hpp"
#include "kiln/nvrtc.hpp"
#include "kiln/target.hpp"

namespace kiln {

std::optional<Target> target_override_from_env() {
  const auto text = env_value("KILN_ARCH");
  if (!text) return std::nullopt;
  return parse_supported_target(*text, nvrtc_supported_archs(), "KILN_ARCH");
}

Target auto_target() {
  if (auto overridden = target_override_from_env()) return *overridden;
  return Target{{9, 0}, true, OutputKind::cubin};
}

}  // namespace kiln

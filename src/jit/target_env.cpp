// The process-dependent half of target_select.hpp: KILN_ARCH and whether NVRTC may be asked.
// `--arch auto` asks the driver, which jit/ may not include (docs/architecture.md#layers), so
// auto_target lives in runtime/cuda_backend.cpp.
#include "base/config.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"
#include "jit/target_select.hpp"

namespace kiln {

std::optional<Target> target_override_from_env() { return target_override(current_config()); }

std::optional<Target> target_override(const Config& config) {
  const auto& text = config.arch;
  if (!text) return std::nullopt;
  // Why unchecked without NVRTC: there is no arch list to check against, and loading NVRTC for it
  // is what KILN_JIT=off promises not to do; a target no layer holds resolves to handle 0.
  return parse_supported_target(*text, compiler_not_asked() ? std::vector<int>{} : nvrtc_supported_archs(), "KILN_ARCH");
}

std::optional<std::string> compiler_not_asked() {
  if (!jit_enabled()) return std::string("KILN_JIT=off");
  // Why also after a load was tried: a failed load leaves no arch list to ask either (the H200 run
  // of bench/device_deploy.sh found the backend choosing no target once `kiln info` had tried).
  if (nvrtc_load_attempted()) {
    const NvrtcApi& api = nvrtc_api();
    if (api.loaded) return std::nullopt;
    return api.load_error;
  }
  if (!nvrtc_location()) return "no NVRTC (" + nvrtc_absence() + ")";
  return std::nullopt;
}

}  // namespace kiln

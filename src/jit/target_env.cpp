// The process-dependent half of target.hpp: KILN_ARCH and `--arch auto`.
#include "base/env.hpp"
#include "driver/cuda_backend.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"
#include "jit/target_select.hpp"

namespace kiln {

std::optional<Target> target_override_from_env() {
  const auto text = env_value("KILN_ARCH");
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

Target auto_target() {
  if (auto overridden = target_override_from_env()) return *overridden;
  const DriverStatus driver = driver_status();
  if (!driver.devices.empty()) {
    const TargetChoice choice = default_target_choice(driver.devices.front(), driver.version);
    if (choice.target) return *choice.target;
  }
  // Why sm_90a: with no usable GPU, the H100/H200 is the most useful thing to build for and shows
  // both quantizer modules.
  return Target{{9, 0}, true, OutputKind::cubin};
}

}  // namespace kiln

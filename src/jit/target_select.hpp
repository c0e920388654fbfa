#pragma once
/// @file
/// How kiln chooses a device's compile target. Pure and CPU-tested, except
/// target_override_from_env and compiler_not_asked, which read the environment and ask NVRTC.
/// auto_target, which also asks the driver, is in runtime/cuda_backend.hpp.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/target.hpp"

namespace kiln {

struct Config;

/// parse_target, then a check that NVRTC knows the arch (`nvrtc_archs` from nvrtcGetSupportedArchs;
/// empty: not checked). `what` names the source of `text` in errors, e.g. "KILN_ARCH" or "--arch".
Target parse_supported_target(std::string_view text, const std::vector<int>& nvrtc_archs,
                              std::string_view what);

/// The target for one device, or why there is none.
struct TargetChoice {
  std::optional<Target> target;
  std::string reason;  ///< why this target (or why none); for people and logs
};

/// Everything target selection depends on, so the rule is a pure function of it.
struct TargetInputs {
  ComputeCapability device;
  std::vector<int> nvrtc_archs;        ///< nvrtcGetSupportedArchs: 75, 80, ..., 120
  std::optional<Version> nvrtc;        ///< absent: NVRTC could not be loaded
  std::optional<Version> driver;       ///< absent: no driver
};

/// The rule (README "Targets"), a pure function of `inputs`:
/// - NVRTC knows the device's arch: exact-arch CUBIN, `sm_XY`, with the `a` suffix from compute
///   capability 9.0 so arch-specific instructions (wgmma, tcgen05, ...) are allowed, never dropped.
///   NVRTC 12.0-13.0 accept `a` for every arch >= 90 they list (tests check the installed one).
/// - NVRTC does not know it (a GPU newer than NVRTC): PTX for the newest `compute_` NVRTC knows that
///   is not newer than the device, which the driver finishes; never with the `a` suffix, because
///   arch-specific PTX (`compute_121a`) loads only on exactly that compute capability. Only when
///   the driver is at least as new as NVRTC; an older driver would refuse the PTX with
///   CUDA_ERROR_UNSUPPORTED_PTX_VERSION, so there is no target and the reason says so. An unknown
///   driver (offline tools) still gets the PTX target, and the reason states the condition.
/// - No NVRTC, no archs, or a device older than every arch NVRTC knows: no target, with the reason.
TargetChoice select_target(const TargetInputs& inputs);

/// The target when no compiler will run (KILN_JIT=off, or no NVRTC): the exact-arch CUBIN that
/// select_target gives a device NVRTC knows (`sm_90a` for 9.0), the only kind `kiln pack` and
/// `kiln warm` store for a device; `why` opens the reason. Pure; no target for an invalid capability.
TargetChoice select_target_without_compiler(ComputeCapability device, const std::string& why);

/// Why target choice must not ask NVRTC: KILN_JIT=off (asking would load it), no NVRTC found, or a
/// load that was tried and failed; nothing when NVRTC may be asked. Reads the environment.
std::optional<std::string> compiler_not_asked();

/// The CUBIN target of every arch NVRTC knows (what `kiln dump --arch all` builds), ascending:
/// `select_target` for a device of exactly that arch.
std::vector<Target> nvrtc_targets(const std::vector<int>& nvrtc_archs);

/// `KILN_ARCH` (an expert and test override of the device's target), parsed and checked against
/// the installed NVRTC; nothing when unset. Throws kiln::Error naming KILN_ARCH, the bad text and the
/// accepted forms. Reads the environment on every call.
std::optional<Target> target_override_from_env();
/// The same for `config`'s KILN_ARCH.
std::optional<Target> target_override(const Config& config);

}  // namespace kiln

#include "jit/target_select.hpp"

#include <algorithm>

#include "kiln/error.hpp"

namespace kiln {

namespace {

constexpr int FIRST_ARCH_SPECIFIC = 90;  // sm_90a is the first arch with an `a` variant
constexpr std::string_view ACCEPTED_FORMS =
    "sm_NN, sm_NNa, compute_NN or compute_NNa, NN the compute capability's digits (sm_90a, sm_121, "
    "compute_120); the a suffix only from 90";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string arch_list(const std::vector<int>& archs) {
  std::string out;
  for (int arch : archs) out += (out.empty() ? "" : ", ") + std::to_string(arch);
  return out;
}

std::string cc_text(ComputeCapability cc) { return std::to_string(cc.major) + "." + std::to_string(cc.minor); }

Target cubin_target(int arch) {
  return Target{compute_capability_of(arch), arch >= FIRST_ARCH_SPECIFIC, OutputKind::cubin};
}

}  // namespace

std::string_view to_string(OutputKind kind) { return kind == OutputKind::cubin ? "cubin" : "ptx"; }

std::string Target::name() const {
  return (kind == OutputKind::cubin ? "sm_" : "compute_") + std::to_string(cc.number()) +
         (arch_specific ? "a" : "");
}

bool Target::carries(std::string_view family) const {
  if (family == "common") return true;
  // Why CUBIN only: a compute_90 PTX target is what a GPU newer than NVRTC gets, and the twin is
  // tuned for the H100/H200, not for whatever GPU finishes that PTX.
  if (family == "hopper") return kind == OutputKind::cubin && cc == ComputeCapability{9, 0};
  return false;
}

std::string Version::str() const { return std::to_string(major) + "." + std::to_string(minor); }

ComputeCapability compute_capability_of(int arch) { return ComputeCapability{arch / 10, arch % 10}; }

Target parse_target(std::string_view text) {
  const auto reject = [text](const std::string& why) -> Target {
    throw_error("'" + std::string(text) + "' is not a compile target (" + why + "); expected " +
                std::string(ACCEPTED_FORMS));
  };
  Target target;
  std::string_view rest = text;
  if (starts_with(rest, "sm_")) {
    target.kind = OutputKind::cubin;
    rest.remove_prefix(3);
  } else if (starts_with(rest, "compute_")) {
    target.kind = OutputKind::ptx;
    rest.remove_prefix(8);
  } else {
    return reject("no sm_ or compute_ prefix");
  }
  if (!rest.empty() && rest.back() == 'a') {
    target.arch_specific = true;
    rest.remove_suffix(1);
  }
  if (rest.size() < 2 || rest.size() > 3 || rest.front() == '0' ||
      !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return reject("the arch must be 2 or 3 digits");
  const int arch = std::stoi(std::string(rest));
  if (target.arch_specific && arch < FIRST_ARCH_SPECIFIC) return reject("the a suffix exists only from 90");
  target.cc = compute_capability_of(arch);
  return target;
}

Target parse_supported_target(std::string_view text, const std::vector<int>& nvrtc_archs,
                              std::string_view what) {
  Target target;
  try {
    target = parse_target(text);
  } catch (const Error& e) {
    throw_error(std::string(what) + ": " + e.what());
  }
  if (!nvrtc_archs.empty() &&
      std::find(nvrtc_archs.begin(), nvrtc_archs.end(), target.cc.number()) == nvrtc_archs.end())
    throw_error(std::string(what) + ": '" + std::string(text) + "': NVRTC does not know arch " +
                std::to_string(target.cc.number()) + " (it knows " + arch_list(nvrtc_archs) + ")");
  return target;
}

TargetChoice select_target(const TargetInputs& in) {
  // Why checked first, and major bounded: a broken driver can report anything, and number() of
  // a huge major overflows.
  if (in.device.major <= 0 || in.device.major > 99 || in.device.minor < 0 || in.device.minor > 9)
    return {std::nullopt, "the device's compute capability " + cc_text(in.device) + " is not valid"};
  const std::string device = "sm_" + std::to_string(in.device.number()) + " (compute capability " +
                             cc_text(in.device) + ")";
  if (!in.nvrtc) return {std::nullopt, "NVRTC is not available, so nothing can be compiled for " + device};
  const std::string nvrtc = "NVRTC " + in.nvrtc->str();
  if (in.nvrtc_archs.empty()) return {std::nullopt, nvrtc + " reported no supported archs"};

  const int arch = in.device.number();
  if (std::find(in.nvrtc_archs.begin(), in.nvrtc_archs.end(), arch) != in.nvrtc_archs.end()) {
    const Target target = cubin_target(arch);
    std::string reason = nvrtc + " knows " + device + ": exact-arch CUBIN " + target.name();
    if (target.arch_specific) reason += ", the a suffix allowing arch-specific instructions";
    return {target, reason};
  }

  // Why the newest arch not above the device: plain compute_XY PTX runs on XY and every newer GPU.
  const auto known_below = std::find_if(in.nvrtc_archs.rbegin(), in.nvrtc_archs.rend(),
                                        [arch](int known) { return known <= arch; });
  if (known_below == in.nvrtc_archs.rend())
    return {std::nullopt, nvrtc + " no longer supports " + device + " (its oldest arch is sm_" +
                              std::to_string(*std::min_element(in.nvrtc_archs.begin(), in.nvrtc_archs.end())) +
                              "); use an older NVRTC"};
  const Target ptx{compute_capability_of(*known_below), false, OutputKind::ptx};
  const std::string fallback = nvrtc + " does not know " + device + "; PTX for " + ptx.name() +
                               ", which the driver compiles for the GPU";
  if (!in.driver)
    return {ptx, fallback + " (driver version unknown: the PTX loads only with a driver >= " + in.nvrtc->str() + ")"};
  if (*in.driver < *in.nvrtc)
    return {std::nullopt, nvrtc + " does not know " + device + ", and its PTX (" + ptx.name() +
                              ") needs a driver >= " + in.nvrtc->str() + " but the driver is " + in.driver->str() +
                              ": loading it would fail with CUDA_ERROR_UNSUPPORTED_PTX_VERSION; install a "
                              "newer driver, or an NVRTC that knows sm_" + std::to_string(arch)};
  return {ptx, fallback + " (driver " + in.driver->str() + ")"};
}

TargetChoice select_target_without_compiler(ComputeCapability device, const std::string& why) {
  if (device.major <= 0 || device.major > 99 || device.minor < 0 || device.minor > 9)
    return {std::nullopt, "the device's compute capability " + cc_text(device) + " is not valid"};
  const Target target = cubin_target(device.number());
  return {target, why + ": exact-arch CUBIN " + target.name() + " from cached binaries (what kiln pack and kiln warm "
                        "build for this device)"};
}

std::vector<Target> nvrtc_targets(const std::vector<int>& nvrtc_archs) {
  std::vector<int> archs = nvrtc_archs;
  std::sort(archs.begin(), archs.end());
  archs.erase(std::unique(archs.begin(), archs.end()), archs.end());
  std::vector<Target> targets;
  for (int arch : archs) targets.push_back(cubin_target(arch));
  return targets;
}

}  // namespace kiln

#pragma once
/// @file
/// Compile targets as values: what NVRTC builds for one device (`sm_90a`, `compute_120`), compute
/// capabilities and versions. How kiln chooses a device's target is internal (src/jit/target_select.hpp).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/export.hpp"

namespace kiln {

/// What NVRTC hands the driver: machine code for one arch, or PTX the driver finishes.
enum class OutputKind { cubin, ptx };
KILN_API std::string_view to_string(OutputKind kind);

/// A GPU's compute capability, e.g. {9, 0} for the H100/H200.
struct ComputeCapability {
  int major = 0;
  int minor = 0;
  int number() const noexcept { return major * 10 + minor; }  ///< 90 for 9.0
  friend bool operator==(ComputeCapability a, ComputeCapability b) noexcept {
    return a.major == b.major && a.minor == b.minor;
  }
};

/// A compile target: `sm_90a` (CUBIN, arch-specific), `sm_86` (CUBIN), `compute_120` (PTX).
struct KILN_API Target {
  ComputeCapability cc;
  bool arch_specific = false;  ///< the `a` suffix: arch-specific instructions allowed
  OutputKind kind = OutputKind::cubin;

  /// `sm_90a`, `compute_120`, ...: the string NVRTC's `-arch=` takes.
  std::string name() const;
  /// Whether modules of `family` are built for this target: "common" always, "hopper" only on
  /// `sm_90` and `sm_90a` (not `compute_90`: that PTX is what a GPU newer than NVRTC runs); any
  /// other family: false.
  bool carries(std::string_view family) const;

  friend bool operator==(const Target& a, const Target& b) noexcept {
    return a.cc == b.cc && a.arch_specific == b.arch_specific && a.kind == b.kind;
  }
};

/// The compute capability of an NVRTC arch number: 90 -> 9.0, 121 -> 12.1.
KILN_API ComputeCapability compute_capability_of(int arch);

/// Parse `sm_90a`, `sm_90`, `compute_120`, `compute_90a` (`sm_` -> CUBIN, `compute_` -> PTX). The
/// `a` suffix is accepted only from compute capability 9.0, as NVRTC does. Throws kiln::Error naming
/// the text and the accepted forms on anything else.
KILN_API Target parse_target(std::string_view text);

/// A version as NVRTC and the driver report it, e.g. {13, 0}. The driver's integer 13000 is {13, 0}.
struct KILN_API Version {
  int major = 0;
  int minor = 0;
  friend bool operator<(Version a, Version b) noexcept {
    return a.major != b.major ? a.major < b.major : a.minor < b.minor;
  }
  friend bool operator==(Version a, Version b) noexcept { return a.major == b.major && a.minor == b.minor; }
  std::string str() const;  ///< "13.0"
};

}  // namespace kiln

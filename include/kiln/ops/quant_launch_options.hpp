#pragma once
/// @file
/// The launch options every kiln quantizer launch uses: the caller's, plus the process's
/// `KILN_PDL` lever.

#include "kiln/export.hpp"
#include "kiln/gpu_backend.hpp"

namespace kiln::ops {

/// `KILN_PDL` (a switch, default off): 1 launches every kiln quantizer with programmatic dependent
/// launch, as if each call asked for it. Read once per process; a bad value logs one warning.
KILN_API bool pdl_lever();

/// `requested` with the process's lever folded in: PDL when the call or the process asks.
inline LaunchOptions quant_launch_options(LaunchOptions requested) {
  requested.programmatic_dependent = requested.programmatic_dependent || pdl_lever();
  return requested;
}

}  // namespace kiln::ops

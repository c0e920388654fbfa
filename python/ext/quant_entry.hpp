#pragma once
// How kiln._kiln_torch reaches the quantizer: _kiln exports one table of plain C function pointers
// as a capsule, so both extensions launch through the same Service per device (a second registry
// would load every module twice and split the counters kiln.cache_stats() reports).
//
// Why plain C across the boundary: _kiln_torch is compiled with PyTorch's _GLIBCXX_USE_CXX11_ABI,
// _kiln and libkiln with the toolchain's; QuantVariant and QuantArgs hold no standard-library
// types, so their layout is the same on both sides, and messages cross as const char*.
#include "kiln/ops/group_quant.hpp"

namespace kiln_python {

inline constexpr const char* quant_entry_capsule = "kiln._kiln._quant_entry";
inline constexpr int quant_entry_version = 1;

enum class QuantStatus : int {
  ok = 0,
  invalid_argument = 1,  ///< the caller's fault: a Python ValueError
  failed = 2,            ///< no kernel, a driver failure: a Python RuntimeError
};

struct QuantEntry {
  int version;
  /// Checks and launches `args` for `variant` on `device` (the caller holds no lock and may have
  /// released the GIL: the first use of a variant compiles). On a status other than ok, `*message`
  /// points at thread-local text valid until this thread's next call.
  QuantStatus (*quantize)(int device, const kiln::ops::QuantVariant& variant, const kiln::ops::QuantArgs& args,
                          const char** message) noexcept;
};

}  // namespace kiln_python

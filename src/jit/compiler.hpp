#pragma once
/// @file
/// NVRTC: an embedded module's source and a target in, a CompiledModule (PTX, CUBIN, log) out.

#include <string>
#include <vector>

#include "jit/compiled_module.hpp"
#include "jit/registry.hpp"
#include "kiln/error.hpp"
#include "kiln/target.hpp"

namespace kiln {

/// The NVRTC option list for `target`: `-arch=<target.name()>`, `-std=c++17`, `-default-device`,
/// then `-lineinfo` when asked. Pure: the same arguments give the same list in the same order
/// (the list is part of the cache key).
std::vector<std::string> compile_options(const Target& target, bool lineinfo);

/// `KILN_LINEINFO` (a switch, default off): compile with `-lineinfo` so profilers and
/// compute-sanitizer map SASS to source lines. A bad value is one warning and off.
bool lineinfo_from_env();

/// Compile `source` with exactly `options` (which must name the target's arch). Every embedded
/// header is handed to NVRTC by name, so `#include "x.cuh"` needs no include path. The result
/// always holds PTX (without a trailing NUL; `ptx.c_str()` is what the driver takes), a CUBIN when
/// `target.kind` is CUBIN, NVRTC's log and the compile time.
///
/// Throws kiln::Error: when `target` does not carry the module's family (a caller bug, kind
/// internal; NVRTC is not run); when there is no NVRTC (unavailable, permanent); and when NVRTC fails
/// (kind compile, retry as compile_retry); then the message shows each error with its numbered
/// source lines and the context holds the call, module, target, options and raw NVRTC log.
///
/// Thread safety: safe to call from many threads at once. NVRTC allows concurrent calls on
/// different nvrtcProgram handles and each call here owns its own (NVRTC 13.0 still serialises
/// most of a compile internally: README, "Parallel compiles"); NVRTC runs under the "C" locale of
/// the calling thread, whatever the process locale.
CompiledModule compile_module(const KernelSource& source, const Target& target,
                              const std::vector<std::string>& options);

/// The retry of an nvrtcCompileProgram failure with `nvrtc_result` (an nvrtcResult): permanent for
/// an error in the source or the options and for no output after NVRTC_SUCCESS, which recur on
/// every try; transient for out of memory and NVRTC's internal failures. compile_module's
/// compile-kind errors carry it (the other NVRTC calls' failures are transient).
Retry compile_retry(int nvrtc_result);

/// The Compiler kiln uses: compile_options with the process's `-lineinfo` choice, compile_module,
/// then the `KILN_DUMP_DIR` dump of what it compiled. Immutable after construction; every member is
/// safe to call from many threads.
class Compiler {
 public:
  /// Reads `KILN_LINEINFO` once, here.
  Compiler();
  explicit Compiler(bool lineinfo) : lineinfo_(lineinfo) {}

  bool lineinfo() const noexcept { return lineinfo_; }
  /// The options `compile(source, target)` passes to NVRTC.
  std::vector<std::string> options(const Target& target) const { return compile_options(target, lineinfo_); }
  /// compile_module with `options(target)`, then dump_if_requested. Throws as compile_module does.
  CompiledModule compile(const KernelSource& source, const Target& target) const;

 private:
  bool lineinfo_ = false;
};

}  // namespace kiln

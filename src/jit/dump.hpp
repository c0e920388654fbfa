#pragma once
/// @file
/// Writing what a compile produced to a folder, for people to read (`KILN_DUMP_DIR`, `kiln dump`).

#include <string>
#include <vector>

#include "jit/compiled_module.hpp"
#include "jit/registry.hpp"

namespace kiln {

/// The files dump_module writes for `module`, as names inside the folder:
/// `<module>.<target>.cu`, `.options` (one option a line), `.ptx`, `.cubin` (only when there is
/// machine code) and `.log` (NVRTC's log, possibly empty).
std::vector<std::string> dump_file_names(const CompiledModule& module);

/// Write `module` (and `source`, its `.cu`) into `dir`, creating it (and its parents) if missing.
/// Each file is written to a temporary name in `dir` and renamed into place, so a reader sees a
/// whole file or the previous one, never half of one; an existing dump of the same module and
/// target is replaced. Throws kiln::Error naming the path and the system error on any failure.
/// Safe to call from many threads (for different modules or targets, or the same).
void dump_module(const CompiledModule& module, const KernelSource& source, const std::string& dir);

/// dump_module into `KILN_DUMP_DIR` when it is set (read on every call); nothing otherwise.
/// Never throws: a failure is one warning naming the module, target and error, and the compile
/// that asked still succeeds.
void dump_if_requested(const CompiledModule& module, const KernelSource& source) noexcept;

}  // namespace kiln

#pragma once
/// @file
/// The CUDA sources embedded in the library at build time (tools/embed_kernels.py over kernels_src/).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// One module: a `.cu` file under `kernels_src/<family>/`.
struct KernelSource {
  std::string module;                ///< file stem, e.g. "per_token_group_quant_fp8"
  std::string family;                ///< folder: "common" (every GPU) or "hopper" (sm_90 only)
  std::vector<std::string> entries;  ///< `extern "C" __global__` functions, in file order
  std::string_view text;             ///< source, lives as long as the process
  std::string sha256;                ///< hex digest of `text`, computed at build time
  /// Bytes of `text` ahead of what NVRTC numbers as line 1: a variant's `#define`s, which end in
  /// `#line 1` so that errors point into the family's file.
  std::size_t prelude_bytes = 0;
};

/// A `.cuh` file, handed to NVRTC by its file name so `#include "name.cuh"` needs no include path.
struct KernelHeader {
  std::string name;
  std::string_view text;
};

/// Every embedded module, sorted by family then file name.
const std::vector<KernelSource>& embedded_modules();
/// Every embedded header.
const std::vector<KernelHeader>& embedded_headers();
/// The module named `module`: an embedded module, or a variant of a variant family by its canonical
/// name (jit/variants.hpp); nullptr for anything else.
const KernelSource* find_module(std::string_view module);

}  // namespace kiln

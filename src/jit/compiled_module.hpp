#pragma once
/// @file
/// The output of one NVRTC compile: what the disk cache stores and the driver loads.

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/target.hpp"

namespace kiln {

struct CompiledModule {
  std::string module;                 ///< embedded module name
  Target target;                      ///< what it was compiled for
  std::vector<std::string> options;   ///< the exact NVRTC option list, in order
  std::string ptx;                    ///< always present: cheap, and what people debug
  std::vector<std::uint8_t> cubin;    ///< machine code; empty when `target.kind` is PTX
  std::string log;                    ///< NVRTC's log (warnings), possibly empty
  double compile_ms = 0;              ///< wall time of nvrtcCompileProgram and output retrieval
};

}  // namespace kiln

#pragma once
// The benchmark's own CUDA module, compiled and loaded by kiln like any embedded one:
// - kiln_bench_empty: the quantizer's signature and no body, the reference for launch overhead;
//   kiln_bench_empty_pdl: the same plus the grid-dependency steps, the reference for PDL launches;
// - kiln_bench_spin: one thread waits `ns` nanoseconds of the GPU's global timer, so the launches
//   queued behind it start back to back, untouched by host latency;
// - kiln_bench_fill: pseudo-random bf16 with group scales spread over 2^-20..2^20 (never zeros,
//   NaN or inf), so kernels are timed on data like a model's.

#include <string_view>

#include "jit/registry.hpp"

namespace kiln::bench {

inline constexpr std::string_view BENCH_MODULE = "kiln_bench";
inline constexpr std::string_view BENCH_EMPTY = "kiln_bench_empty";
inline constexpr std::string_view BENCH_EMPTY_PDL = "kiln_bench_empty_pdl";
inline constexpr std::string_view BENCH_SPIN = "kiln_bench_spin";
inline constexpr std::string_view BENCH_FILL = "kiln_bench_fill";

/// The module (family "common"); lives for the process.
const KernelSource& bench_kernel_source();

}  // namespace kiln::bench

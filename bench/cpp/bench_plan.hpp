#pragma once
// How much `kiln-bench` measures: iteration counts for a full run and for --quick, and the shapes
// the issue names. One place, so every part and the report agree on what was run.

#include <cstdint>
#include <vector>

namespace kiln::bench {

struct BenchPlan {
  bool quick = false;
  int ceiling_copies = 20;   ///< timed device-to-device copies
  int arm_launches = 100;     ///< timed launches per arm and shape (in batches of 10 per event pair)
  int floor_launches = 200;  ///< the same at the floor points, whose kernels are shorter
  int variant_launches = 30; ///< timed launches per variant and shape (the family table)
  int decode_batch = 200;    ///< launches per back-to-back batch and per graph
  int decode_reps = 10;      ///< batches and graph replays per decode shape
  int jit_runs = 5;          ///< fresh processes per JIT variant
  std::uint64_t memory_hit_calls = 1'000'000;
  std::uint64_t pick_calls = 10'000'000;
  int launch_chunks = 20;  ///< chunks of `launch_chunk` launches, per path
  int launch_chunk = 500;
  int compile_reps = 3;   ///< NVRTC compiles per measurement (after the process's first)
  int disk_loads = 1000;  ///< timed disk-cache hits per folder size
  int remote_nodes = 9;   ///< fresh empty-disk nodes per module against a warm Redis
  int disk_entries_small = 10;
  int disk_entries_large = 10'000;

  /// The full plan, or --quick's: fewer iterations, the same shapes and cache sizes.
  static BenchPlan make(bool quick);
};

/// Rows and columns of the arms table: M x K.
const std::vector<std::uint32_t>& arm_ms();
const std::vector<std::uint32_t>& arm_ks();
/// The floor points: twin against shared where the pick's CTA floor decides.
const std::vector<std::uint32_t>& floor_ms();
const std::vector<std::uint32_t>& floor_ks();
/// Rows and columns of the family table: every variant at M x K.
const std::vector<std::uint32_t>& variant_ms();
const std::vector<std::uint32_t>& variant_ks();
/// Decode shapes are the arm shapes with M at most this.
inline constexpr std::uint32_t DECODE_MAX_M = 16;

/// Bytes one quantizer launch must move: read bf16 x, write e4m3 q and one fp32 scale per group.
inline double quant_bytes(std::uint32_t m, std::uint32_t k) {
  const double elements = static_cast<double>(m) * k;
  return 3 * elements + 4 * elements / 128;
}

}  // namespace kiln::bench

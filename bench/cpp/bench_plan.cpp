#include "bench_plan.hpp"

namespace kiln::bench {

BenchPlan BenchPlan::make(bool quick) {
  BenchPlan plan;
  if (!quick) return plan;
  plan.quick = true;
  plan.ceiling_copies = 5;
  plan.arm_launches = 30;
  plan.floor_launches = 40;
  plan.variant_launches = 10;
  plan.decode_batch = 50;
  plan.decode_reps = 3;
  plan.jit_runs = 3;
  plan.memory_hit_calls = 200'000;
  plan.pick_calls = 2'000'000;
  plan.launch_chunks = 6;
  plan.compile_reps = 1;
  plan.disk_loads = 200;
  plan.remote_nodes = 3;
  return plan;
}

const std::vector<std::uint32_t>& arm_ms() {
  static const std::vector<std::uint32_t> ms{1, 16, 25, 128, 512, 1168, 2048, 4576, 8192, 16384, 32768};
  return ms;
}

const std::vector<std::uint32_t>& arm_ks() {
  static const std::vector<std::uint32_t> ks{2048, 5120, 7168, 18432};
  return ks;
}

const std::vector<std::uint32_t>& variant_ms() {
  static const std::vector<std::uint32_t> ms{1, 16, 128, 2048, 8192, 32768};
  return ms;
}

const std::vector<std::uint32_t>& variant_ks() {
  static const std::vector<std::uint32_t> ks{2048, 7168, 18432};
  return ks;
}

const std::vector<std::uint32_t>& floor_ms() {
  static const std::vector<std::uint32_t> ms{16, 17, 25, 53, 64, 132};
  return ms;
}

const std::vector<std::uint32_t>& floor_ks() {
  static const std::vector<std::uint32_t> ks{5120, 6144, 7168, 17408};
  return ks;
}

}  // namespace kiln::bench

// The seed's invariants (fp8_act_quant.rs comments), ported as tests over many (m, k).
#include <catch2/catch.hpp>

#include <vector>

#include "kiln/ops/fp8_act_quant.hpp"

using namespace kiln;
using namespace kiln::ops;

namespace {

const KernelHandle SHARED{11};
const KernelHandle HOPPER{22};

std::vector<std::uint32_t> sample_m() { return {0, 1, 2, 7, 16, 17, 25, 52, 53, 64, 132, 1168, 4576, 8192, 65535, 65536, 1u << 31}; }
std::vector<std::uint32_t> sample_k() {
  return {0, 128, 256, 1024, 1152, 2048, 5120, 6144, 7168, 16384, 17408, 18432, 128u * 65535, 128u * 524281};
}

std::uint32_t ceil_div(std::uint32_t a, std::uint32_t b) { return (a + b - 1) / b; }

}  // namespace

TEST_CASE("a pick never pairs one kernel with the other's grid") {
  const Fp8ActQuant both(SHARED, HOPPER, 132);
  const Fp8ActQuant shared_only = Fp8ActQuant::shared_only(SHARED, 132);
  const Fp8ActQuant twin_only(KernelHandle{}, HOPPER, 132);
  for (const auto* quant : {&both, &shared_only, &twin_only})
    for (bool requested : {true, false})
      for (std::uint32_t sm : {0u, 1u, 132u, 148u})
        for (auto m : sample_m())
          for (auto k : sample_k()) {
            CAPTURE(requested, sm, m, k);
            const auto chosen = quant->pick_with(requested, m, k, sm);
            CHECK(chosen.requested == requested);
            if (!chosen.launches()) {
              // A no-op or a refusal pairs no kernel with no grid.
              CHECK_FALSE(chosen.kernel.loaded());
              CHECK(chosen.grid == std::array<std::uint32_t, 3>{0, 0, 0});
              CHECK_FALSE(chosen.twin);
              continue;
            }
            CHECK(chosen.twin == !chosen.reject.has_value());
            CHECK(chosen.kernel == (chosen.twin ? quant->hopper() : quant->shared()));
            CHECK(chosen.grid == fp8_quant_grid(chosen.twin, m, k));
          }
}

TEST_CASE("M is on grid X in both arms; shared grid is (M, K/128, 1); twin Y splits few rows") {
  for (auto m : sample_m())
    for (auto k : sample_k()) {
      CAPTURE(m, k);
      const std::uint32_t groups = k / 128;
      const auto shared = fp8_quant_grid(false, m, k);
      CHECK(shared == std::array<std::uint32_t, 3>{m, groups, 1});
      const auto twin = fp8_quant_grid(true, m, k);
      CHECK(twin[0] == m);
      CHECK(twin[2] == 1);
      const std::uint32_t busy_slots_y = std::max<std::uint32_t>(1, ceil_div(groups, 16));
      const std::uint32_t fill_y = ceil_div(FP8_QUANT_HOPPER_TARGET_CTAS, std::max<std::uint32_t>(m, 1));
      CHECK(twin[1] == std::min(busy_slots_y, fill_y));
      CHECK(twin[1] >= 1);
      CHECK(twin[1] <= FP8_QUANT_MAX_GRID_Y);
      if (groups > 0) CHECK(twin[1] <= groups);
    }
  // Measured on the H200 (bench/results/2026-12-03-h200-twin-geometry.md).
  CHECK(fp8_quant_grid(true, 8192, 7168)[1] == 1);
  CHECK(fp8_quant_grid(true, 4576, 7168)[1] == 1);
  CHECK(fp8_quant_grid(true, 2048, 7168)[1] == 2);
  CHECK(fp8_quant_grid(true, 512, 7168)[1] == 4);
  CHECK(fp8_quant_grid(true, 128, 18432)[1] == 9);
  CHECK(fp8_quant_grid(true, 1, 128u * 524281)[1] == FP8_QUANT_HOPPER_TARGET_CTAS);
}

TEST_CASE("for every L and every grid Y in 1..=L the spans of blocks 0..Y partition 0..L exactly once") {
  for (std::uint32_t groups = 1; groups <= 512; ++groups) {
    for (std::uint32_t grid_y = 1; grid_y <= groups; ++grid_y) {
      std::uint32_t next = 0;  // spans are contiguous and ascending, so one cursor checks coverage
      bool ok = true;
      for (std::uint32_t block = 0; block < grid_y && ok; ++block) {
        const auto [start, end] = fp8_quant_hopper_span(groups, grid_y, block);
        if (start == end) continue;  // an empty tail block owns nothing
        ok = start == next && end > start;
        next = end;
      }
      if (!ok || next != groups) {
        CAPTURE(groups, grid_y);
        FAIL("spans do not partition the groups");
      }
    }
  }
  // Blocks past the grid own nothing, even when block * span would wrap 32 bits.
  CHECK(fp8_quant_hopper_span(10, 1, 1) == std::pair<std::uint32_t, std::uint32_t>{10, 10});
  CHECK(fp8_quant_hopper_span(1u << 31, 2, 1u << 31) == std::pair<std::uint32_t, std::uint32_t>{1u << 31, 1u << 31});
}

TEST_CASE("when rows are split, a CTA at kiln's Y extent spans at most 16 groups, one per slot") {
  for (std::uint32_t groups = 1; groups <= 4096; ++groups) {
    const std::uint32_t grid_y = fp8_quant_grid(true, 1, groups * 128)[1];
    for (std::uint32_t block = 0; block < grid_y; ++block) {
      const auto [start, end] = fp8_quant_hopper_span(groups, grid_y, block);
      REQUIRE(end - start <= FP8_QUANT_HOPPER_GROUPS_PER_CTA);
    }
  }
}

TEST_CASE("lanes cover each 128-element group exactly once with 8 lanes of two 8-element runs") {
  for (std::uint32_t span = 1; span <= 16; ++span) {
    std::vector<std::vector<int>> covered(span, std::vector<int>(128, 0));
    for (std::uint32_t tid = 0; tid < 128; ++tid) {
      const auto lane = fp8_quant_hopper_lane(tid, span);
      if (tid / 8 >= span) {
        CHECK_FALSE(lane.has_value());  // slots past the span get nothing
        continue;
      }
      REQUIRE(lane.has_value());
      CHECK(lane->sub == tid / 8);
      // Run w of lane l starts at (8w + l) * 8, so each run's 8 lanes read 128 contiguous bytes.
      CHECK(lane->starts[0] == (tid % 8) * 8);
      CHECK(lane->starts[1] == 64 + (tid % 8) * 8);
      for (const auto start : lane->starts)
        for (auto e = start; e < start + FP8_QUANT_HOPPER_RUN; ++e) ++covered[lane->sub][e];
    }
    for (std::uint32_t sub = 0; sub < span; ++sub)
      for (int element = 0; element < 128; ++element) {
        CAPTURE(span, sub, element);
        CHECK(covered[sub][element] == 1);
      }
  }
  CHECK_FALSE(fp8_quant_hopper_lane(0, 0).has_value());
}

TEST_CASE("available and twin_present follow the handles") {
  CHECK_FALSE(Fp8ActQuant().available());
  CHECK_FALSE(Fp8ActQuant().twin_present());
  CHECK(Fp8ActQuant::shared_only(SHARED).available());
  CHECK_FALSE(Fp8ActQuant::shared_only(SHARED).twin_present());
  CHECK(Fp8ActQuant(KernelHandle{}, HOPPER, 0).available());
  CHECK(Fp8ActQuant(KernelHandle{}, HOPPER, 0).twin_present());
  const auto none = Fp8ActQuant().pick_with(true, 1024, 5120, 132);
  CHECK_FALSE(none.kernel.loaded());
  CHECK(none.reject == Fp8HopperReject::absent);
}

TEST_CASE("kernel and grid come from the same pick as pick() with the process lever") {
  const Fp8ActQuant both(SHARED, HOPPER, 132);
  for (auto m : sample_m())
    for (auto k : {2048u, 5120u, 17408u}) {
      const auto chosen = both.pick(m, k);
      CHECK(both.kernel(m, k) == chosen.kernel);
      CHECK(both.grid(m, k) == chosen.grid);
      CHECK(chosen.requested == fp8_act_quant_hopper_enabled());
    }
}

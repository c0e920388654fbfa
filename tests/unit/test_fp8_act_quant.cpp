// The seed's invariants (fp8_act_quant.rs comments), ported as tests over many (m, k).
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "kiln/ops/fp8_act_quant.hpp"
#include "ops/fp8_act_quant_floor.hpp"

using namespace kiln;
using namespace kiln::ops;

namespace {

const KernelHandle SHARED{11};
const KernelHandle HOPPER{22};

std::vector<std::uint32_t> sample_m() { return {0, 1, 2, 7, 16, 17, 25, 52, 53, 64, 132, 1168, 4576, 8192, 65535, 65536, 1u << 31}; }
std::vector<std::uint32_t> sample_k() {
  return {0, 128, 256, 1024, 1152, 2048, 5120, 6144, 7168, 16384, 17408, 18432, 128u * 65535, 128u * 524281};
}


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

TEST_CASE("shared grid is (M, K/128, 1); the twin's is flat, ceil(M * L / 16) CTAs capped at grid X") {
  for (auto m : sample_m())
    for (auto k : sample_k()) {
      CAPTURE(m, k);
      const std::uint32_t groups = k / 128;
      const auto shared = fp8_quant_grid(false, m, k);
      CHECK(shared == std::array<std::uint32_t, 3>{m, groups, 1});
      const auto twin = fp8_quant_grid(true, m, k);
      const std::uint64_t total = std::uint64_t{m} * groups;
      CHECK(twin[0] == std::min<std::uint64_t>((total + 15) / 16, FP8_QUANT_MAX_GRID_X));
      CHECK(twin[1] == 1);
      CHECK(twin[2] == 1);
    }
  // The shapes of docs/performance.md's arms table: 56 groups per row at K=7168.
  CHECK(fp8_quant_grid(true, 1, 7168)[0] == 4);
  CHECK(fp8_quant_grid(true, 16, 7168)[0] == 56);
  CHECK(fp8_quant_grid(true, 32768, 7168)[0] == 114688);
  CHECK(fp8_quant_grid(true, 3, 128)[0] == 1);
  CHECK(fp8_quant_grid(true, 17, 128)[0] == 2);
  // Past 2^31-1 CTAs the grid is capped (the kernel's slots loop), never wrapped.
  CHECK(fp8_quant_grid(true, 0x7FFFFFFFu, 0xFFFFFF80u)[0] == FP8_QUANT_MAX_GRID_X);
  CHECK(fp8_quant_grid(true, 0xFFFFFFFFu, 128u * 16)[0] == FP8_QUANT_MAX_GRID_X);
  CHECK(fp8_quant_grid(true, 0x7FFFFFFEu, 128u * 16)[0] == 0x7FFFFFFEu);
}

TEST_CASE("the twin's grid and loop cover every group exactly once, capped grid included") {
  // total groups -> grid X; the cap is exercised with a small stand-in grid, as the loop only
  // depends on grid_x, not on how it was chosen.
  for (std::uint64_t total = 1; total <= 700; total += 7) {
    const std::uint32_t full = static_cast<std::uint32_t>((total + 15) / 16);
    for (std::uint32_t grid_x : {full, std::max<std::uint32_t>(1, full / 3), 1u}) {
      std::vector<int> covered(total, 0);
      for (std::uint32_t cta = 0; cta < grid_x; ++cta)
        for (std::uint32_t sub = 0; sub < FP8_QUANT_HOPPER_GROUPS_PER_CTA; ++sub)
          for (std::uint64_t pass = 0;; ++pass) {
            const std::uint64_t g = fp8_quant_hopper_group(cta, sub, grid_x, pass);
            if (g >= total) break;
            ++covered[g];
          }
      CAPTURE(total, grid_x);
      CHECK(std::count(covered.begin(), covered.end(), 1) == static_cast<long>(total));
    }
  }
  CHECK(fp8_quant_hopper_group(0, 0, 1, 0) == 0);
  CHECK(fp8_quant_hopper_group(3, 5, 10, 0) == 53);
  CHECK(fp8_quant_hopper_group(3, 5, 10, 2) == (2 * 10 + 3) * 16 + 5);
}

TEST_CASE("lanes cover each 128-element group exactly once with 8 lanes of 16 contiguous elements") {
  std::vector<std::vector<int>> covered(FP8_QUANT_HOPPER_GROUPS_PER_CTA, std::vector<int>(128, 0));
  for (std::uint32_t tid = 0; tid < 128; ++tid) {
    const auto lane = fp8_quant_hopper_lane(tid);
    CHECK(lane.sub == tid / 8);
    CHECK(lane.start == (tid % 8) * 16);
    for (auto e = lane.start; e < lane.start + FP8_QUANT_HOPPER_RUN; ++e) ++covered[lane.sub][e];
  }
  for (std::uint32_t sub = 0; sub < FP8_QUANT_HOPPER_GROUPS_PER_CTA; ++sub)
    for (int element = 0; element < 128; ++element) {
      CAPTURE(sub, element);
      CHECK(covered[sub][element] == 1);
    }
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

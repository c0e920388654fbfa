// Fp8ActQuant::launch validates every argument before any launch and launches one pick's kernel
// with that pick's grid.
#include <catch2/catch.hpp>

#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/ops/quant_launch_options.hpp"
#include "ops/fp8_act_quant_floor.hpp"
#include "recording_backend.hpp"

using namespace kiln;
using namespace kiln::ops;
using kiln::test::error_of;

namespace {

const KernelHandle SHARED{11};
const KernelHandle HOPPER{22};
const KernelHandle SHARED_PDL{33};

// Fake device addresses: never dereferenced, only checked for alignment and passed through.
void* address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

}  // namespace

TEST_CASE("launch passes x, q, scales, k and the pick's grid to the backend") {
  test::RecordingBackend gpu(132);
  const Fp8ActQuant quant(SHARED, HOPPER, 132);
  void* x = address(0x10000);
  void* q = address(0x20000);
  auto* scales = static_cast<float*>(address(0x30000));
  void* stream = address(0x777);
  const auto chosen = quant.launch(gpu, x, q, scales, 4096, 7168, stream);
  REQUIRE(gpu.launches.size() == 1);
  const auto& call = gpu.launches[0];
  CHECK(chosen.twin == fp8_act_quant_hopper_enabled());
  CHECK(call.kernel == chosen.kernel);
  CHECK(call.grid.x == chosen.grid[0]);
  CHECK(call.grid.y == chosen.grid[1]);
  CHECK(call.grid.z == 1);
  CHECK(call.block.x == 128);
  CHECK(call.stream == stream);
  CHECK(call.x == x);
  CHECK(call.q == q);
  CHECK(call.scales == scales);
  CHECK(call.k == 7168);
}

TEST_CASE("launch rejects bad arguments by name and launches nothing") {
  test::RecordingBackend gpu(132);
  const Fp8ActQuant quant(SHARED, HOPPER, 132);
  void* x = address(0x10000);
  void* q = address(0x20000);
  auto* scales = static_cast<float*>(address(0x30000));
  CHECK_THAT(error_of([&] { quant.launch(gpu, x, q, scales, 16, 100, nullptr); }),
             Catch::Contains("'k'") && Catch::Contains("multiple of 128"));
  CHECK_THAT(error_of([&] { quant.launch(gpu, nullptr, q, scales, 16, 128, nullptr); }), Catch::Contains("'x'"));
  CHECK_THAT(error_of([&] { quant.launch(gpu, x, nullptr, scales, 16, 128, nullptr); }), Catch::Contains("'q'"));
  CHECK_THAT(error_of([&] { quant.launch(gpu, x, q, nullptr, 16, 128, nullptr); }), Catch::Contains("'scales'"));
  CHECK_THAT(error_of([&] { quant.launch(gpu, address(0x10001), q, scales, 16, 128, nullptr); }),
             Catch::Contains("'x'") && Catch::Contains("2-byte"));
  CHECK_THAT(error_of([&] { quant.launch(gpu, x, q, static_cast<float*>(address(0x30002)), 16, 128, nullptr); }),
             Catch::Contains("'scales'") && Catch::Contains("4-byte"));
  CHECK_THAT(error_of([&] { quant.launch(gpu, x, q, scales, 0x80000000u, 128, nullptr); }),
             Catch::Contains("'m'") && Catch::Contains("2^31-1"));
  CHECK_THAT(error_of([&] { Fp8ActQuant().launch(gpu, x, q, scales, 16, 128, nullptr); }),
             Catch::Contains("no quantizer kernel"));
  // The shared kernel alone cannot take more than 65535 groups on grid Y.
  CHECK_THAT(error_of([&] { Fp8ActQuant::shared_only(SHARED, 132).launch(gpu, x, q, scales, 1, 128u * 65536, nullptr); }),
             Catch::Contains("'k'") && Catch::Contains("65535"));
  CHECK(gpu.launches.empty());
}

TEST_CASE("m == 0 or k == 0 is a no-op") {
  test::RecordingBackend gpu(132);
  const Fp8ActQuant quant(SHARED, HOPPER, 132);
  for (const auto& noop : {quant.launch(gpu, nullptr, nullptr, nullptr, 0, 7168, nullptr),
                           quant.launch(gpu, nullptr, nullptr, nullptr, 16, 0, nullptr),
                           quant.pick_with(true, 0, 7168, 132), quant.pick_with(false, 16, 0, 132)}) {
    // Nothing runs, so the pick names no kernel, no grid and no floor verdict.
    CHECK(noop.action == Fp8QuantAction::noop);
    CHECK_FALSE(noop.kernel.loaded());
    CHECK(noop.grid == std::array<std::uint32_t, 3>{0, 0, 0});
    CHECK_FALSE(noop.twin);
    CHECK_FALSE(noop.reject.has_value());
  }
  CHECK(gpu.launches.empty());
}

namespace {

constexpr std::uint32_t U32_MAX = 0xFFFFFFFFu;

// What launch_with did: the pick it returned, or the message it threw; and what it launched.
struct Outcome {
  std::optional<Fp8QuantPick> pick;
  std::string error;
  std::vector<test::RecordedLaunch> launches;
};

Outcome launch_outcome(const Fp8ActQuant& quant, bool lever, std::uint32_t m, std::uint32_t k) {
  test::RecordingBackend gpu(quant.sm_count());
  Outcome out;
  try {
    out.pick = quant.launch_with(lever, gpu, address(0x10000), address(0x20000),
                                 static_cast<float*>(address(0x30000)), m, k, nullptr);
  } catch (const Error& e) {
    out.error = e.what();
  }
  out.launches = gpu.launches;
  return out;
}

}  // namespace

TEST_CASE("pick and launch agree at the edges of m and k, for both arms: a pick never describes a launch that cannot happen") {
  const std::uint32_t ms[] = {0, 1, 2, 21, 22, 3071, 3072, 0x7FFFFFFE, 0x7FFFFFFF, 0x80000000, U32_MAX};
  const std::uint32_t ks[] = {0,           1,           127,         128,         129,    5120,
                              128 * 65535, 128 * 65536, 128 * 65537, U32_MAX / 128 * 128, U32_MAX};
  std::size_t launched = 0, noops = 0, refused = 0;
  for (const std::uint32_t sm : {0u, 1u, 132u, U32_MAX})
    for (const auto& quant : {Fp8ActQuant(SHARED, HOPPER, sm), Fp8ActQuant::shared_only(SHARED, sm),
                              Fp8ActQuant(KernelHandle{}, HOPPER, sm)})
      for (const bool lever : {true, false})
        for (const std::uint32_t m : ms)
          for (const std::uint32_t k : ks) {
            CAPTURE(sm, quant.shared().raw, quant.hopper().raw, lever, m, k);
            const Fp8QuantPick pick = quant.pick_with(lever, m, k, sm);
            // The pick's action is the shape check on the kernel the floor rule chose.
            const bool rule_twin = !fp8_act_quant_hopper_reject(lever, quant.twin_present(), quant.shared().loaded(),
                                                                m, k, sm).has_value();
            CHECK(pick.action == fp8_quant_action(rule_twin, m, k));
            const Outcome out = launch_outcome(quant, lever, m, k);
            if (pick.launches()) {
              ++launched;
              // Inside the driver's limits, and exactly what launch sends.
              CHECK(pick.kernel == (pick.twin ? HOPPER : SHARED));
              CHECK(pick.grid == fp8_quant_grid(pick.twin, m, k));
              CHECK(pick.grid[0] >= 1);
              CHECK(pick.grid[0] <= 0x7FFFFFFFu);
              CHECK(pick.grid[1] >= 1);
              CHECK(pick.grid[1] <= 65535u);
              CHECK(pick.grid[2] == 1);
              CHECK(out.error.empty());
              REQUIRE(out.launches.size() == 1);
              CHECK(out.launches[0].kernel == pick.kernel);
              CHECK(out.launches[0].grid.x == pick.grid[0]);
              CHECK(out.launches[0].grid.y == pick.grid[1]);
              CHECK(out.launches[0].grid.z == pick.grid[2]);
              REQUIRE(out.pick.has_value());
              CHECK(out.pick->twin == pick.twin);
              CHECK(out.pick->reject == pick.reject);
              continue;
            }
            CHECK_FALSE(pick.kernel.loaded());
            CHECK(pick.grid == std::array<std::uint32_t, 3>{0, 0, 0});
            CHECK_FALSE(pick.twin);
            CHECK(out.launches.empty());
            if (pick.action == Fp8QuantAction::noop) {
              ++noops;
              CHECK(out.error.empty());
              REQUIRE(out.pick.has_value());
              CHECK(out.pick->action == Fp8QuantAction::noop);
              continue;
            }
            ++refused;
            // Refused with launch's own error, word for word.
            CHECK_FALSE(out.pick.has_value());
            CHECK(out.error == error_of([&] { fp8_quant_require_launchable(pick, m, k); }));
            CHECK_FALSE(out.error.empty());
          }
  CHECK(launched > 0);
  CHECK(noops > 0);
  CHECK(refused > 0);
}

TEST_CASE("each refusal names its limit, and the limits sit exactly at the driver's") {
  const Fp8ActQuant both(SHARED, HOPPER, 132);
  const Fp8ActQuant shared_only = Fp8ActQuant::shared_only(SHARED, 132);
  CHECK(both.pick_with(true, 0x7FFFFFFF, 128, 132).launches());
  CHECK(both.pick_with(true, 0x80000000, 128, 132).action == Fp8QuantAction::m_past_grid_x);
  CHECK(both.pick_with(true, U32_MAX, 128, 132).action == Fp8QuantAction::m_past_grid_x);
  CHECK(both.pick_with(true, U32_MAX, 0, 132).action == Fp8QuantAction::m_past_grid_x);  // launch checks m first
  CHECK(both.pick_with(true, 0, 129, 132).action == Fp8QuantAction::k_not_multiple);     // k before the no-op
  CHECK(shared_only.pick_with(true, 1, 128 * 65535, 132).launches());
  CHECK(shared_only.pick_with(true, 1, 128 * 65536, 132).action == Fp8QuantAction::k_past_grid_y);
  CHECK(shared_only.pick_with(true, 0, 128 * 65536, 132).action == Fp8QuantAction::noop);
  // Lever off at K = 8388608: the shared kernel would need grid Y 65536; the reason stays.
  const auto off = both.pick_with(false, 1, 8388608, 132);
  CHECK(off.action == Fp8QuantAction::k_past_grid_y);
  CHECK(off.reject == Fp8HopperReject::not_requested);
  CHECK(both.pick_with(true, 1, 8388608, 132).grid == std::array<std::uint32_t, 3>{65536 / 16, 1, 1});
  CHECK_THAT(error_of([&] { fp8_quant_require_launchable(off, 1, 8388608); }),
             Catch::Contains("'k'") && Catch::Contains("65535"));
  CHECK_THAT(error_of([&] { fp8_quant_require_launchable(both.pick_with(true, U32_MAX, 128, 132), U32_MAX, 128); }),
             Catch::Contains("'m'") && Catch::Contains("2^31-1"));
  // Misaligned pointers with the twin alone: refused, and the same shape aligned launches.
  const Fp8ActQuant twin_only(KernelHandle{}, HOPPER, 132);
  CHECK(twin_only.pick_with(true, 4096, 7168, 132, false).action == Fp8QuantAction::twin_misaligned);
  CHECK(twin_only.pick_with(true, 4096, 7168, 132, true).launches());
  // Misaligned pointers move the launch to the shared kernel, whose grid-Y limit then applies.
  CHECK(both.pick_with(true, 1, 8388608, 132, false).action == Fp8QuantAction::k_past_grid_y);
  CHECK(both.pick_with(true, 1, 8388608, 132, false).reject == Fp8HopperReject::misaligned);
}

TEST_CASE("pointers not aligned for the twin route to the shared kernel, and the pick says why") {
  test::RecordingBackend gpu(132);
  const Fp8ActQuant quant(SHARED, HOPPER, 132);
  auto* scales = static_cast<float*>(address(0x30000));
  const auto x_off = quant.pick_with(true, 4096, 7168, 132, false);
  CHECK_FALSE(x_off.twin);
  CHECK(x_off.reject == Fp8HopperReject::misaligned);
  CHECK(x_off.kernel == SHARED);
  CHECK(x_off.grid == fp8_quant_grid(false, 4096, 7168));
  // Why launch_with(true): the refusal needs the lever on, whatever the process's lever says.
  const auto chosen = quant.launch_with(true, gpu, address(0x10002), address(0x20000), scales, 4096, 7168, nullptr);
  CHECK(chosen.reject == Fp8HopperReject::misaligned);
  const auto q_off = quant.launch_with(true, gpu, address(0x10000), address(0x20004), scales, 4096, 7168, nullptr);
  CHECK(q_off.reject == Fp8HopperReject::misaligned);
  // q 8-byte aligned is not enough: the twin stores 16 bytes per lane.
  const auto q_eight = quant.launch_with(true, gpu, address(0x10000), address(0x20008), scales, 4096, 7168, nullptr);
  CHECK(q_eight.reject == Fp8HopperReject::misaligned);
  REQUIRE(gpu.launches.size() == 3);
  CHECK(gpu.launches[0].kernel == SHARED);
  CHECK(gpu.launches[1].kernel == SHARED);
  CHECK(gpu.launches[2].kernel == SHARED);
  CHECK(gpu.launches[1].grid.y == 7168 / 128);
  // Aligned pointers keep the twin; so does a refusal that came first (floor before alignment).
  CHECK(quant.pick_with(true, 4096, 7168, 132, true).twin);
  CHECK(quant.pick_with(true, 1, 7168, 132, false).reject == Fp8HopperReject::too_few_ctas);
  // With no shared kernel, misaligned pointers cannot be served at all.
  const Fp8ActQuant twin_only(KernelHandle{}, HOPPER, 132);
  CHECK_THAT(error_of([&] { twin_only.launch(gpu, address(0x10002), address(0x20000), scales, 4096, 7168, nullptr); }),
             Catch::Contains("'x'") && Catch::Contains("16-byte"));
}

TEST_CASE("the twin takes a K past the shared kernel's grid-Y limit, on its flat grid") {
  test::RecordingBackend gpu(132);
  const Fp8ActQuant quant(SHARED, HOPPER, 132);
  const std::uint32_t k = 128u * 8 * 70000;
  auto* scales = static_cast<float*>(address(0x30000));
  // Why launch_with: both lever values must run here, whatever KILN_FP8_ACT_QUANT_HOPPER says.
  const auto chosen = quant.launch_with(true, gpu, address(0x10000), address(0x20000), scales, 1, k, nullptr);
  CHECK(chosen.twin);
  REQUIRE(gpu.launches.size() == 1);
  CHECK(gpu.launches[0].kernel == HOPPER);
  CHECK(gpu.launches[0].grid.x == 8 * 70000 / 16);
  CHECK(gpu.launches[0].grid.y == 1);
  // Lever off, the shared kernel would need 560000 CTAs on Y: refused, nothing more launched.
  CHECK_THAT(error_of([&] { quant.launch_with(false, gpu, address(0x10000), address(0x20000), scales, 1, k, nullptr); }),
             Catch::Contains("'k'") && Catch::Contains("65535"));
  CHECK(gpu.launches.size() == 1);
  // launch() is launch_with with the process's lever.
  const auto by_process = quant.launch(gpu, address(0x10000), address(0x20000), scales, 1, 128, nullptr);
  CHECK(by_process.requested == fp8_act_quant_hopper_enabled());
}

// Run twice by Meson: plainly, and with KILN_PDL=1 (test fp8_act_quant_launch_pdl).
TEST_CASE("PDL: the call's option and the process's KILN_PDL reach the backend, on both paths", "[pdl]") {
  const char* lever = std::getenv("KILN_PDL");
  const bool process_pdl = lever != nullptr && std::string(lever) == "1";
  CHECK(pdl_lever() == process_pdl);
  test::RecordingBackend gpu(132);
  const Fp8ActQuant quant(SHARED, HOPPER, 132, SHARED_PDL);
  void* x = address(0x10000);
  void* q = address(0x20000);
  auto* scales = static_cast<float*>(address(0x30000));
  quant.launch(gpu, x, q, scales, 8, 7168, nullptr);
  quant.launch(gpu, x, q, scales, 8, 7168, nullptr, LaunchOptions{true});
  quant.launch_with(false, gpu, x, q, scales, 8, 7168, nullptr, LaunchOptions{true});


  REQUIRE(gpu.launches.size() == 3);
  // M = 8 picks the shared kernel (28 twin CTAs): with PDL it runs as its PDL entry, without as the plain one.
  CHECK(gpu.launches[0].options.programmatic_dependent == process_pdl);
  CHECK(gpu.launches[0].kernel == (process_pdl ? SHARED_PDL : SHARED));
  CHECK(gpu.launches[1].options.programmatic_dependent);
  CHECK(gpu.launches[1].kernel == SHARED_PDL);
  CHECK(gpu.launches[2].options.programmatic_dependent);
  CHECK(gpu.launches[2].kernel == SHARED_PDL);
}

TEST_CASE("PDL: the twin keeps its one entry; a shared kernel without its PDL entry is launched plainly", "[pdl]") {
  test::RecordingBackend gpu(132);
  void* x = address(0x10000);
  void* q = address(0x20000);
  auto* scales = static_cast<float*>(address(0x30000));
  const Fp8ActQuant with_pdl_entry(SHARED, HOPPER, 132, SHARED_PDL);
  with_pdl_entry.launch_with(true, gpu, x, q, scales, 4096, 7168, nullptr, LaunchOptions{true});
  const Fp8ActQuant without_pdl_entry(SHARED, HOPPER, 132);
  without_pdl_entry.launch_with(true, gpu, x, q, scales, 8, 7168, nullptr, LaunchOptions{true});

  REQUIRE(gpu.launches.size() == 2);
  CHECK(gpu.launches[0].kernel == HOPPER);
  CHECK(gpu.launches[0].options.programmatic_dependent);
  CHECK(gpu.launches[1].kernel == SHARED);
  CHECK_FALSE(gpu.launches[1].options.programmatic_dependent);
}

// Fp8ActQuant::launch validates every argument before any launch and launches one pick's kernel
// with that pick's grid.
#include <catch2/catch.hpp>

#include <cstring>

#include "error_of.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "recording_backend.hpp"

using namespace kiln;
using namespace kiln::ops;
using kiln::test::error_of;

namespace {

const KernelHandle SHARED{11};
const KernelHandle HOPPER{22};

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
  quant.launch(gpu, nullptr, nullptr, nullptr, 0, 7168, nullptr);
  quant.launch(gpu, nullptr, nullptr, nullptr, 16, 0, nullptr);
  CHECK(gpu.launches.empty());
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
  if (fp8_act_quant_hopper_enabled()) {
    const auto chosen = quant.launch(gpu, address(0x10002), address(0x20000), scales, 4096, 7168, nullptr);
    CHECK(chosen.reject == Fp8HopperReject::misaligned);
    const auto q_off = quant.launch(gpu, address(0x10000), address(0x20004), scales, 4096, 7168, nullptr);
    CHECK(q_off.reject == Fp8HopperReject::misaligned);
    REQUIRE(gpu.launches.size() == 2);
    CHECK(gpu.launches[0].kernel == SHARED);
  }
  // Aligned pointers keep the twin; so does a refusal that came first (floor before alignment).
  CHECK(quant.pick_with(true, 4096, 7168, 132, true).twin);
  CHECK(quant.pick_with(true, 1, 7168, 132, false).reject == Fp8HopperReject::too_few_ctas);
  // With no shared kernel, misaligned pointers cannot be served at all.
  const Fp8ActQuant twin_only(KernelHandle{}, HOPPER, 132);
  CHECK_THAT(error_of([&] { twin_only.launch(gpu, address(0x10002), address(0x20000), scales, 4096, 7168, nullptr); }),
             Catch::Contains("'x'") && Catch::Contains("16-byte"));
}

TEST_CASE("the twin takes a K past the shared kernel's grid-Y limit, on its own bounded Y") {
  test::RecordingBackend gpu(132);
  const Fp8ActQuant quant(SHARED, HOPPER, 132);
  if (!fp8_act_quant_hopper_enabled()) return;
  const std::uint32_t k = 128u * 8 * 70000;
  quant.launch(gpu, address(0x10000), address(0x20000), static_cast<float*>(address(0x30000)), 1, k, nullptr);
  REQUIRE(gpu.launches.size() == 1);
  CHECK(gpu.launches[0].kernel == HOPPER);
  CHECK(gpu.launches[0].grid.y == FP8_QUANT_HOPPER_TARGET_CTAS);
}

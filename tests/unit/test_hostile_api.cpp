// Bad input to the C++ API beyond tests/unit/test_fp8_act_quant_launch.cpp: sizes at the limits of
// their types, hostile module and entry names, hostile cache configurations and ordinals. Each is
// a kiln::Error naming the argument (and nothing launched), a handle 0, or a degraded cache; never
// a crash, an overflow or an exception out of a noexcept path.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <limits>

#include "cache_test_support.hpp"
#include "ops/fp8_act_quant_floor.hpp"
#include "runtime/cuda_backend.hpp"
#include "error_of.hpp"
#include "hostile_support.hpp"
#include "jit/compiler.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"
#include "recording_backend.hpp"

using namespace kiln;
using namespace kiln::ops;
using namespace kiln::test;

namespace {

const KernelHandle SHARED{11};
const KernelHandle HOPPER{22};
constexpr std::uint32_t U32_MAX = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint32_t K_MAX = U32_MAX / 128 * 128;  // the largest k that is a multiple of 128

void* address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }
float* scales_at(std::uintptr_t value) { return static_cast<float*>(address(value)); }

}  // namespace

TEST_CASE("launch at the limits of m and k: errors name the argument, nothing launches") {
  RecordingBackend gpu(132);
  const Fp8ActQuant quant(SHARED, HOPPER, 132);
  void* x = address(0x10000);
  void* q = address(0x20000);
  CHECK_THAT(error_of([&] { quant.launch(gpu, x, q, scales_at(0x30000), U32_MAX, 128, nullptr); }),
             Catch::Contains("'m'") && Catch::Contains("2^31-1"));
  CHECK_THAT(error_of([&] { quant.launch(gpu, x, q, scales_at(0x30000), 1, U32_MAX, nullptr); }),
             Catch::Contains("'k'") && Catch::Contains("multiple of 128"));
  CHECK_THAT(error_of([&] { quant.launch(gpu, x, q, scales_at(0x30000), 1, 127, nullptr); }),
             Catch::Contains("'k'"));
  CHECK_THAT(error_of([&] { quant.launch(gpu, x, q, scales_at(0x30000), 1, 129, nullptr); }),
             Catch::Contains("'k'"));
  CHECK_THAT(error_of([&] { Fp8ActQuant::shared_only(SHARED, 132).launch(gpu, x, q, scales_at(0x30000), 0x7FFFFFFF,
                                                                          K_MAX, nullptr); }),
             Catch::Contains("'k'") && Catch::Contains("65535"));
  // Argument errors come before the pointer checks and before the "no kernel" check, in a fixed order.
  CHECK_THAT(error_of([&] { Fp8ActQuant().launch(gpu, nullptr, nullptr, nullptr, U32_MAX, 100, nullptr); }),
             Catch::Contains("'k'"));
  CHECK(gpu.launches.empty());
}

TEST_CASE("the largest shapes: each arm's exact kernel and grid, or launch's refusal, never a grid past the limits") {
  const Fp8ActQuant quant(SHARED, HOPPER, 132);
  constexpr std::uint32_t M_MAX = 0x7FFFFFFF;
  constexpr std::uint32_t L_MAX = K_MAX / 128;  // 33554431 groups
  struct Expect {
    bool lever;
    std::uint32_t m, k;
    Fp8QuantAction action;
    KernelHandle kernel;
    std::array<std::uint32_t, 3> grid;
  };
  const Fp8QuantAction launch = Fp8QuantAction::launch;
  const Fp8QuantAction too_wide = Fp8QuantAction::k_past_grid_y;
  const Expect expected[] = {
      // Lever on. One row is 1 twin CTA at K = 128 (below the floor of 40): the shared kernel.
      {true, 1, 128, launch, SHARED, {1, 1, 1}},
      // The twin's grid is flat: ceil(M * L / 16) CTAs, capped at grid X's 2^31-1.
      {true, 1, 128u * 65535, launch, HOPPER, {4096, 1, 1}},
      {true, 1, K_MAX, launch, HOPPER, {(L_MAX + 15) / 16, 1, 1}},
      {true, M_MAX, 128, launch, HOPPER, {(M_MAX / 16) + 1, 1, 1}},
      {true, M_MAX, 128u * 65535, launch, HOPPER, {FP8_QUANT_MAX_GRID_X, 1, 1}},
      {true, M_MAX, K_MAX, launch, HOPPER, {FP8_QUANT_MAX_GRID_X, 1, 1}},
      // Lever off: the shared kernel, one CTA per group, refused past 65535 groups.
      {false, 1, 128, launch, SHARED, {1, 1, 1}},
      {false, 1, 128u * 65535, launch, SHARED, {1, 65535, 1}},
      {false, 1, K_MAX, too_wide, KernelHandle{}, {0, 0, 0}},
      {false, M_MAX, 128, launch, SHARED, {M_MAX, 1, 1}},
      {false, M_MAX, 128u * 65535, launch, SHARED, {M_MAX, 65535, 1}},
      {false, M_MAX, K_MAX, too_wide, KernelHandle{}, {0, 0, 0}},
  };
  static_assert(L_MAX > 65535, "K_MAX must be past the shared kernel's grid Y");
  for (const Expect& e : expected) {
    CAPTURE(e.lever, e.m, e.k);
    const auto pick = quant.pick_with(e.lever, e.m, e.k, 132);
    CHECK(pick.action == e.action);
    CHECK(pick.kernel == e.kernel);
    CHECK(pick.grid == e.grid);
    CHECK(pick.twin == (e.kernel == HOPPER));
    CHECK(fp8_quant_hopper_ctas(e.m, e.k) == fp8_quant_grid(true, e.m, e.k)[0]);

    RecordingBackend gpu(132);
    const std::string error = error_of([&] {
      quant.launch_with(e.lever, gpu, address(0x10000), address(0x20000), scales_at(0x30000), e.m, e.k, nullptr);
    });
    if (e.action == launch) {
      CHECK(error.empty());
      REQUIRE(gpu.launches.size() == 1);
      CHECK(gpu.launches[0].kernel == e.kernel);
      CHECK(gpu.launches[0].grid.x == e.grid[0]);
      CHECK(gpu.launches[0].grid.y == e.grid[1]);
      CHECK(gpu.launches[0].grid.z == e.grid[2]);
      CHECK(gpu.launches[0].k == e.k);
    } else {
      CHECK_THAT(error, Catch::Contains("'k'") && Catch::Contains("65535"));
      CHECK(gpu.launches.empty());
    }
  }
  CHECK(fp8_quant_hopper_min_m(K_MAX, U32_MAX) >= 1);  // saturates, never wraps to 0
}

TEST_CASE("sm_count at its limits: 0 and UINT32_MAX pick without overflow") {
  const Fp8ActQuant quant(SHARED, HOPPER, 0);
  // 0 and 1 SM: a floor of 1 CTA, which 2^31-1 rows pass.
  for (const std::uint32_t sm_count : {0u, 1u}) {
    CAPTURE(sm_count);
    CHECK(fp8_quant_min_ctas(sm_count) == 1);
    const auto pick = quant.pick_with(true, 0x7FFFFFFF, K_MAX, sm_count);
    CHECK(pick.launches());
    CHECK(pick.kernel == HOPPER);
    CHECK(pick.grid == std::array<std::uint32_t, 3>{0x7FFFFFFF, 1, 1});
  }
  // UINT32_MAX SMs: a floor of ceil(0.3 x (2^32 - 1)) CTAs, which only a huge twin grid reaches.
  CHECK(fp8_quant_min_ctas(U32_MAX) == 1288490189u);
  CHECK(quant.pick_with(true, 0x7FFFFFFF, K_MAX, U32_MAX).twin);
  // One row at K_MAX is 2097152 twin CTAs, below it: the shared kernel is chosen, and it would need
  // more than 65535 CTAs on Y: refused, the reason kept.
  const auto huge = quant.pick_with(true, 1, K_MAX, U32_MAX);
  CHECK(huge.action == Fp8QuantAction::k_past_grid_y);
  CHECK(huge.reject == Fp8HopperReject::too_few_ctas);
  CHECK_FALSE(huge.kernel.loaded());
  const auto narrow = quant.pick_with(true, 0x7FFFFFFF, 128, U32_MAX);
  CHECK(narrow.kernel == SHARED);
  CHECK(narrow.grid == std::array<std::uint32_t, 3>{0x7FFFFFFF, 1, 1});
  CHECK_FALSE(quant.pick_with(true, 1, 128, U32_MAX).twin);  // cannot fill that many SMs
}

TEST_CASE("hostile module and entry names are handle 0 without loading or compiling anything") {
  FakeDriver::instance().reset();
  const driver::DriverApi api = FakeDriver::instance().api();
  FakeProvider provider;
  CudaBackend backend(api, 0, provider.provider(), always(sm90a()));
  const std::string module(FP8_QUANT_MODULE);
  const std::vector<std::pair<std::string, std::string>> names = {
      {"", ""},
      {module, ""},
      {"", std::string(FP8_QUANT_ENTRY)},
      {module + std::string(1, '\0'), std::string(FP8_QUANT_ENTRY)},
      {module, std::string(FP8_QUANT_ENTRY) + std::string(1, '\0') + "x"},
      {"../" + module, std::string(FP8_QUANT_ENTRY)},
      {std::string(1 << 20, 'm'), std::string(1 << 20, 'e')},
      {module, std::string(FP8_QUANT_HOPPER_ENTRY)},  // the other module's entry
      {std::string(FP8_QUANT_HOPPER_MODULE), std::string(FP8_QUANT_ENTRY)},
  };
  for (const auto& [m, e] : names) {
    CAPTURE(m.size(), e.size());
    CHECK_FALSE(backend.try_kernel(m, e).loaded());
    CHECK_FALSE(backend.try_target_kernel(m, e).loaded());
  }
  CHECK(provider.provided() == 0);
  CHECK(FakeDriver::instance().loads() == 0);
  // Forged handles: refused by launch with an error, never dereferenced.
  for (const std::uint64_t raw : {std::uint64_t{1}, std::uint64_t{1} << 32 | 1, ~std::uint64_t{0}}) {
    CAPTURE(raw);
    CHECK_THAT(error_of([&] { backend.launch(KernelHandle{raw}, {1, 1, 1}, {128, 1, 1}, 0, nullptr, nullptr); }),
               Catch::Contains("not returned by this backend"));
  }
  CHECK(FakeDriver::instance().launches().empty());
}

TEST_CASE("ordinals out of range are errors naming 'ordinal'") {
  FakeDriver::instance().reset();
  const driver::DriverApi api = FakeDriver::instance().api();
  FakeProvider provider;
  for (const int ordinal : {-1, std::numeric_limits<int>::min(), 1, std::numeric_limits<int>::max()}) {
    CAPTURE(ordinal);
    CHECK_THAT(error_of([&] { CudaBackend(api, ordinal, provider.provider(), always(sm90a())); }),
               Catch::Contains("'ordinal'"));
  }
  CHECK_THAT(error_of([] { InternalService(-1, std::make_shared<DiskCache>(DiskCacheConfig{}), Compiler(false)); }),
             Catch::Contains("'ordinal'"));
  CHECK(FakeDriver::instance().retained(0) == 0);
}

TEST_CASE("hostile cache configurations degrade, never throw") {
  TempDir tmp;
  WarningCounter warnings;
  SECTION("an empty folder name") {
    DiskCacheConfig config = config_for("");
    DiskCache cache(config);
    CHECK(cache.status().mode == DiskCacheMode::memory_only);
    CHECK_THAT(cache.status().reason, Catch::Contains("empty"));
  }
  SECTION("a folder under a file") {
    const std::string file = tmp / "file";
    { std::ofstream(file) << "x"; }
    DiskCache cache(config_for(file + "/cache"));
    CHECK(cache.status().mode == DiskCacheMode::memory_only);
  }
  SECTION("a bound of one byte: nothing fits, every store is a counted failure") {
    DiskCache cache(config_for(tmp.path(), 1));
    CHECK(cache.status().mode == DiskCacheMode::read_write);
    for (int i = 0; i < 3; ++i) cache.store(key_for("a", sm90a()), module_for("a", sm90a()));
    CHECK(cache.counters().store_failures == 3);
    CHECK(cache.stats().entries == 0);
  }
  SECTION("a lock timeout of zero: compiles go on without waiting") {
    DiskCache cache(config_for(tmp.path(), std::uint64_t{1} << 30, std::chrono::milliseconds(0)));
    int calls = 0;
    const auto result = cache.load_or_compile(key_for("a", sm90a()), "a", sm90a(), [&] {
      ++calls;
      return module_for("a", sm90a());
    });
    CHECK(calls == 1);
    CHECK(result.outcome == CacheOutcome::compiled);
  }
  CHECK(warnings.count() <= 1);
}

TEST_CASE("a driver reporting an absurd compute capability gets no target, not an overflow") {
  const std::vector<int> archs = {75, 80, 86, 90, 120};
  for (const ComputeCapability cc : {ComputeCapability{std::numeric_limits<int>::max(), 0}, ComputeCapability{100, 0},
                                     ComputeCapability{std::numeric_limits<int>::min(), 9}, ComputeCapability{9, -1},
                                     ComputeCapability{9, std::numeric_limits<int>::max()}}) {
    CAPTURE(cc.major, cc.minor);
    const TargetChoice choice = select_target(TargetInputs{cc, archs, Version{13, 0}, Version{13, 0}});
    CHECK_FALSE(choice.target.has_value());
    CHECK_THAT(choice.reason, Catch::Contains("is not valid"));
  }
  FakeDriver::instance().reset({{"broken", 1 << 30, 0, 132}});
  const driver::DriverApi api = FakeDriver::instance().api();
  FakeProvider provider;
  CudaBackend backend(api, 0, provider.provider(), default_target_choice);
  CHECK_FALSE(backend.available());
  CHECK_THAT(backend.unavailable_reason(), Catch::Contains("not valid"));
  CHECK_FALSE(backend.try_kernel(FP8_QUANT_MODULE, FP8_QUANT_ENTRY).loaded());
}

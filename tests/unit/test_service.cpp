// Service over a fake driver: the quantizer it hands out follows the device's modules: resolved
// again after clear() and after a transient load failure, never again after a compile error.
#include <catch2/catch.hpp>

#include "base/config.hpp"
#include "cache/disk/disk_cache.hpp"
#include "cache_test_support.hpp"
#include "runtime/cuda_backend.hpp"
#include "fake_driver.hpp"
#include "hostile_support.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "error_of.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const std::string SHARED_MODULE(ops::FP8_QUANT_MODULE);

const std::string SEED_FAMILY_MODULE = "per_token_group_quant-bf16-g128-e4m3-row";

struct Fixture {
  FakeDriver& fake = FakeDriver::instance();
  FakeProvider files;
  driver::DriverApi api;
  std::unique_ptr<InternalService> service;

  explicit Fixture(FakeDevice device = {"NVIDIA H200", 9, 0, 132}, Target target = sm90a()) {
    fake.reset({device});
    api = fake.api();
    service = std::make_unique<InternalService>(std::make_unique<CudaBackend>(api, 0, files.provider(), always(target)),
                                        std::make_shared<DiskCache>(DiskCacheConfig{}));
  }

  // One launch of whichever kernel the pick chooses for a small shape.
  void launch(const ops::Fp8ActQuant& quant) {
    alignas(16) static unsigned char buffer[4096];
    quant.launch(service->gpu(), buffer, buffer, reinterpret_cast<float*>(buffer), 1, 128, nullptr);
  }
};

}  // namespace

TEST_CASE("services built from Config values, not the environment, each keep their own cache folder and target") {
  FakeDriver& fake = FakeDriver::instance();
  fake.reset({{"NVIDIA H200", 9, 0, 132}});
  const driver::DriverApi api = fake.api();
  TempDir tmp;
  Config first;
  first.cache_dir = tmp / "first";
  first.prefetch = false;  // Why: nothing here needs a module, and a prefetch would compile them all
  Config second = first;
  second.cache_dir = tmp / "second";
  second.arch = "compute_80";
  Config off = first;
  off.cache = false;

  InternalService a(api, 0, first);
  InternalService b(api, 0, second);
  InternalService c(api, 0, off);
  CHECK(a.disk()->status().mode == DiskCacheMode::read_write);
  CHECK(a.disk()->status().dir == tmp / "first");
  CHECK(b.disk()->status().mode == DiskCacheMode::read_write);
  CHECK(b.disk()->status().dir == tmp / "second");
  CHECK(c.disk()->status().mode == DiskCacheMode::disabled);
  CHECK(a.disk() != b.disk());
  REQUIRE(a.backend().target().has_value());
  CHECK(a.backend().target()->name() == "sm_90a");
  REQUIRE(b.backend().target().has_value());
  CHECK(b.backend().target()->name() == "compute_80");
  CHECK(b.backend().target_reason() == "KILN_ARCH=compute_80");
}

TEST_CASE("after clear() the service's quantizer is resolved again and launches") {
  Fixture f;
  const ops::Fp8ActQuant before = f.service->fp8_act_quant();
  REQUIRE(before.shared().loaded());
  REQUIRE(before.twin_present());
  f.service->backend().clear();
  // The handles resolved before are stale now; the service must not hand them out again.
  CHECK_THROWS_AS(f.launch(before), Error);
  const ops::Fp8ActQuant after = f.service->fp8_act_quant();
  CHECK(after.shared().loaded());
  CHECK(after.shared() != before.shared());
  CHECK_NOTHROW(f.launch(after));
  CHECK(f.fake.launches().size() == 1);
  // Without another clear the resolved quantizer is kept: no lookup, same handles.
  const auto hits = f.service->counters().memory.memory_hits;
  CHECK(f.service->fp8_act_quant().shared() == after.shared());
  CHECK(f.service->counters().memory.memory_hits == hits);
}

TEST_CASE("a transient load failure is retried on the next call, not remembered") {
  Fixture f;
  f.fake.fail_next("cuModuleLoadDataEx", CUDA_ERROR_OUT_OF_MEMORY, 2);
  const ops::Fp8ActQuant first = f.service->fp8_act_quant();
  CHECK_FALSE(first.available());
  CHECK(f.service->counters().memory.failures == 2);
  const ops::Fp8ActQuant second = f.service->fp8_act_quant();
  CHECK(second.shared().loaded());
  CHECK(second.twin_present());
  CHECK_NOTHROW(f.launch(second));
}

TEST_CASE("a compile error is remembered: the module is not compiled again on every call") {
  Fixture f;
  f.files.fail(SHARED_MODULE);
  for (int call = 0; call < 3; ++call) {
    const ops::Fp8ActQuant quant = f.service->fp8_act_quant();
    CHECK_FALSE(quant.shared().loaded());
    CHECK(quant.twin_present());
  }
  CHECK(f.files.provided(SHARED_MODULE) == 1);
  CHECK(f.service->counters().memory.failures == 1);
}

TEST_CASE("NVRTC out of memory is not a compile error: the module is compiled again on the next call") {
  Fixture f;
  f.files.fail(SHARED_MODULE, 1);  // NVRTC_ERROR_OUT_OF_MEMORY
  CHECK_FALSE(f.service->fp8_act_quant().shared().loaded());
  CHECK(f.files.provided(SHARED_MODULE) == 1);
  f.files.fail(SHARED_MODULE, 11);  // NVRTC_ERROR_INTERNAL_ERROR
  CHECK_FALSE(f.service->fp8_act_quant().shared().loaded());
  CHECK(f.files.provided(SHARED_MODULE) == 2);
  f.files.fail(SHARED_MODULE, 5);  // NVRTC_ERROR_INVALID_OPTION: the same options fail the same way
  for (int call = 0; call < 3; ++call) CHECK_FALSE(f.service->fp8_act_quant().shared().loaded());
  CHECK(f.files.provided(SHARED_MODULE) == 3);
}

TEST_CASE("a clear() while a launch is between resolve and cuLaunchKernel does not unload its module") {
  Fixture f;
  const ops::Fp8ActQuant quant = f.service->fp8_act_quant();
  // The hook runs inside the launch, after kiln resolved the handle and before the driver uses it.
  int clears = 0;
  f.fake.on_launch([&] {
    if (clears++ == 0) f.service->backend().clear();
  });
  CHECK_NOTHROW(f.launch(quant));
  f.fake.on_launch(nullptr);
  CHECK(clears == 1);
  CHECK(f.fake.uses_after_unload() == 0);
  CHECK(f.fake.launches().size() == 1);
  // The module the launch held is unloaded once the launch let go of it.
  CHECK(f.fake.live_modules() == 0);
  CHECK_THROWS_AS(f.launch(quant), Error);  // retired: refused, never handed to the driver
  CHECK(f.fake.uses_after_unload() == 0);
}

namespace {

ops::QuantArgs seed_call(std::uint64_t k) {
  alignas(16) static unsigned char buffer[4096];
  ops::QuantArgs args;
  args.x = buffer;
  args.q = buffer;
  args.scales = buffer;
  args.m = 1;
  args.k = k;
  return args;
}

}  // namespace

TEST_CASE("the seed variant loads the kernels its calls can run here: with the twin, not the family module") {
  Fixture f;  // sm_90, no clock figures: the rule prefers the family kernel
  const ops::GroupQuant seed = f.service->group_quant(ops::QuantVariant{});
  REQUIRE(seed.available());
  CHECK(seed.twin().loaded());
  CHECK(f.files.provided(SHARED_MODULE) == 1);
  CHECK(f.files.provided(SEED_FAMILY_MODULE) == 0);
  // One row is below the twin's floor: the shared kernel; 4096 rows fill the device: the twin.
  const ops::QuantLaunch small = seed.launch(f.service->gpu(), seed_call(7168));
  CHECK(small.pick.kernel == ops::QuantKernel::shared);
  CHECK(small.pick.reason() == ops::QuantPickReason::shared_small_grid);
  ops::QuantArgs large = seed_call(7168);
  large.m = 4096;
  const ops::QuantLaunch twin = seed.launch(f.service->gpu(), large);
  CHECK(twin.pick.kernel == ops::QuantKernel::twin);
  CHECK(twin.kernel == seed.twin());
  CHECK(f.files.provided(SEED_FAMILY_MODULE) == 0);
  // prepare loads the family module, which the calls the seed kernels cannot take need.
  REQUIRE(seed.prepare(f.service->gpu()));
  CHECK(f.files.provided(SEED_FAMILY_MODULE) == 1);
  ops::QuantArgs other_eps = seed_call(128);
  other_eps.eps = 1e-6f;
  const ops::QuantLaunch launched = seed.launch(f.service->gpu(), other_eps);
  CHECK(launched.pick.kernel == ops::QuantKernel::family_one_group);
  CHECK(launched.pick.why_not(ops::QuantKernel::twin) == ops::QuantPickReason::outside_seed_kernels);
  CHECK(f.files.provided(SEED_FAMILY_MODULE) == 1);  // found in memory: nothing loaded during the call
  const auto launches = f.fake.launches();
  REQUIRE(launches.size() == 3);
  CHECK(launches[0].entry == "per_token_group_quant_fp8");
  CHECK(launches[0].grid[1] == 56);
  CHECK(launches[1].entry == "per_token_group_quant_fp8_hopper");
  CHECK(launches[1].grid[0] == 4096 * 56 / 16);
  CHECK(launches[2].entry == "per_token_group_quant");
  // The caller may name any kernel the call suits (A/B runs).
  const ops::QuantLaunch family = seed.launch_as(f.service->gpu(), large, ops::QuantKernel::family_one_group);
  CHECK(family.pick.why_not(ops::QuantKernel::twin) == ops::QuantPickReason::chosen_by_caller);
  CHECK(f.fake.launches().back().entry == "per_token_group_quant");
  CHECK_THAT(error_of([&] { seed.launch_as(f.service->gpu(), other_eps, ops::QuantKernel::twin); }),
             Catch::Contains("'kernel'") && Catch::Contains("outside the seed kernels"));
  CHECK_THAT(error_of([&] { seed.launch_as(f.service->gpu(), large, ops::QuantKernel::family_two_groups); }),
             Catch::Contains("ships one group per slot"));
}

TEST_CASE("the seed variant with PDL: the twin, the shared kernel's PDL entry and the family kernel all get it") {
  Fixture f;
  const ops::GroupQuant seed = f.service->group_quant(ops::QuantVariant{});
  ops::QuantArgs call = seed_call(7168);
  call.options.programmatic_dependent = true;
  seed.launch(f.service->gpu(), call);  // one row: the shared kernel, as its PDL entry
  call.m = 4096;
  seed.launch(f.service->gpu(), call);  // the twin
  seed.launch_as(f.service->gpu(), call, ops::QuantKernel::family_one_group);
  const auto launches = f.fake.launches();
  REQUIRE(launches.size() == 3);
  CHECK(launches[0].entry == "per_token_group_quant_fp8_pdl");
  CHECK(launches[1].entry == "per_token_group_quant_fp8_hopper");
  CHECK(launches[2].entry == "per_token_group_quant");
  for (const auto& launch : launches) CHECK(launch.dependent);
}

TEST_CASE("the seed variant without the twin (sm_80): the family kernel, a row past the shared kernel's grid Y too") {
  Fixture f({"NVIDIA A100", 8, 0, 108}, sm80());
  const ops::GroupQuant seed = f.service->group_quant(ops::QuantVariant{});
  REQUIRE(seed.available());
  CHECK_FALSE(seed.twin().loaded());
  // The shared kernel for the small grids, the family module for the rest.
  CHECK(f.files.provided(SHARED_MODULE) == 1);
  CHECK(f.files.provided(SEED_FAMILY_MODULE) == 1);
  CHECK(seed.launch(f.service->gpu(), seed_call(7168)).pick.kernel == ops::QuantKernel::shared);
  const std::uint64_t k = 128ull * (ops::FP8_QUANT_MAX_GRID_Y + 1);
  CHECK_NOTHROW(ops::GroupQuant::check(ops::QuantVariant{}, seed_call(k)));
  const ops::QuantLaunch past = seed.launch(f.service->gpu(), seed_call(k));
  CHECK(past.pick.kernel == ops::QuantKernel::family_one_group);
  CHECK(past.pick.why_not(ops::QuantKernel::shared) == ops::QuantPickReason::outside_seed_kernels);
  ops::QuantArgs large = seed_call(7168);
  large.m = 4096;
  const ops::QuantLaunch launched = seed.launch(f.service->gpu(), large);
  CHECK(launched.pick.kernel == ops::QuantKernel::family_one_group);
  CHECK(launched.pick.why_not(ops::QuantKernel::twin) == ops::QuantPickReason::absent);
  CHECK(launched.pick.why_not(ops::QuantKernel::shared) == ops::QuantPickReason::device_prefers_family);
  CHECK_THAT(error_of([&] { seed.launch_as(f.service->gpu(), large, ops::QuantKernel::twin); }),
             Catch::Contains("not in this device's image"));
}

TEST_CASE("the seed variant without its family module: prepare says so, and a call it must take names the variant") {
  Fixture f;
  f.files.fail(SEED_FAMILY_MODULE);
  const ops::GroupQuant seed = f.service->group_quant(ops::QuantVariant{});
  REQUIRE(seed.available());  // the twin and the shared kernel
  CHECK_FALSE(seed.prepare(f.service->gpu()));
  ops::QuantArgs large = seed_call(7168);
  large.m = 4096;
  CHECK(seed.launch(f.service->gpu(), large).pick.kernel == ops::QuantKernel::twin);  // the twin's calls still run
  ops::QuantArgs other_eps = seed_call(128);
  other_eps.eps = 1e-6f;
  try {
    seed.launch(f.service->gpu(), other_eps);
    FAIL("a call needing the missing family module launched");
  } catch (const Error& error) {
    CHECK_THAT(error.what(), Catch::Contains("variant " + SEED_FAMILY_MODULE + " is not available"));
    // The C ABI tells this apart from a driver failure by the empty call (KILN_ERROR_UNAVAILABLE).
    CHECK(error.context().call.empty());
  }
}

TEST_CASE("a two-kernel variant launches its one-group kernel on a small grid and its shipped one on a large") {
  Fixture f;  // 132 SMs
  ops::QuantVariant int8;
  int8.output = ops::QuantOutput::int8;
  const ops::GroupQuant quant = f.service->group_quant(int8);
  REQUIRE(quant.available());
  ops::QuantArgs call = seed_call(7168);
  call.m = 16;
  const ops::QuantLaunch small = quant.launch(f.service->gpu(), call);
  CHECK(small.pick.entry == ops::QUANT_ONE_GROUP_ENTRY);
  CHECK(small.kernel != quant.kernel());
  call.m = 8192;
  const ops::QuantLaunch large = quant.launch(f.service->gpu(), call);
  CHECK(large.pick.kernel == ops::QuantKernel::family_two_groups);
  CHECK(large.kernel == quant.kernel());
  const ops::QuantLaunch forced = quant.launch_as(f.service->gpu(), call, ops::QuantKernel::family_one_group);
  CHECK(forced.pick.reason() == ops::QuantPickReason::chosen_by_caller);
  const auto launches = f.fake.launches();
  REQUIRE(launches.size() == 3);
  // One module, both entries: no second compile or load for the one-group kernel.
  CHECK(f.files.provided("per_token_group_quant-bf16-g128-int8-row") == 1);
  CHECK(launches[0].entry == "per_token_group_quant_one_group");
  CHECK(launches[0].grid[0] == 16 * 56 / 32);
  CHECK(launches[1].entry == "per_token_group_quant");
  CHECK(launches[1].grid[0] == 8192 * 56 / 64);
  CHECK(launches[2].entry == "per_token_group_quant_one_group");
  CHECK(launches[2].grid[0] == 8192 * 56 / 32);
}

TEST_CASE("a two-kernel variant whose module failed to load at resolve loads it at the launch that needs it") {
  Fixture f;
  ops::QuantVariant int8;
  int8.output = ops::QuantOutput::int8;
  f.fake.fail_next("cuModuleLoadDataEx", CUDA_ERROR_OUT_OF_MEMORY, 1);
  const ops::GroupQuant quant = f.service->group_quant(int8);
  CHECK_FALSE(quant.kernel().loaded());
  ops::QuantArgs call = seed_call(7168);
  call.m = 16;
  const ops::QuantLaunch launched = quant.launch(f.service->gpu(), call);
  CHECK(launched.pick.entry == ops::QUANT_ONE_GROUP_ENTRY);
  CHECK(launched.kernel.loaded());
  const auto launches = f.fake.launches();
  REQUIRE(launches.size() == 1);
  CHECK(launches[0].entry == "per_token_group_quant_one_group");
}

TEST_CASE("a two-kernel variant's image without its one-group entry does not load: the variant is unavailable") {
  Fixture f;
  ops::QuantVariant int8;
  int8.output = ops::QuantOutput::int8;
  f.files.export_only("per_token_group_quant-bf16-g128-int8-row", {"per_token_group_quant"});
  const ops::GroupQuant quant = f.service->group_quant(int8);
  CHECK_FALSE(quant.available());
  ops::QuantArgs call = seed_call(7168);
  call.m = 16;
  CHECK_THROWS_AS(quant.launch(f.service->gpu(), call), Error);
  CHECK(f.fake.launches().empty());
}

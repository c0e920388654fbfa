// Service over a fake driver: the quantizer it hands out follows the device's modules: resolved
// again after clear() and after a transient load failure, never again after a compile error.
#include <catch2/catch.hpp>

#include "cache/disk/disk_cache.hpp"
#include "cache_test_support.hpp"
#include "driver/cuda_backend.hpp"
#include "fake_driver.hpp"
#include "hostile_support.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/service.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const std::string SHARED_MODULE(ops::FP8_QUANT_MODULE);

const std::string SEED_FAMILY_MODULE = "per_token_group_quant-bf16-g128-e4m3-row";

struct Fixture {
  FakeDriver& fake = FakeDriver::instance();
  FakeProvider files;
  driver::DriverApi api;
  std::unique_ptr<Service> service;

  explicit Fixture(FakeDevice device = {"NVIDIA H200", 9, 0, 132}, Target target = sm90a()) {
    fake.reset({device});
    api = fake.api();
    service = std::make_unique<Service>(std::make_unique<CudaBackend>(api, 0, files.provider(), always(target)),
                                        std::make_shared<DiskCache>(DiskCacheConfig{}));
  }

  // One launch of whichever kernel the pick chooses for a small shape.
  void launch(const ops::Fp8ActQuant& quant) {
    alignas(16) static unsigned char buffer[4096];
    quant.launch(service->gpu(), buffer, buffer, reinterpret_cast<float*>(buffer), 1, 128, nullptr);
  }
};

}  // namespace

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

TEST_CASE("the seed variant: prepare loads its family module too, so no later call loads one") {
  Fixture f;
  const ops::GroupQuant seed = f.service->group_quant(ops::QuantVariant{});
  REQUIRE(seed.available());
  // Resolving loads the seed's two modules only; the family module waits for a call that needs it.
  CHECK(f.files.provided(SEED_FAMILY_MODULE) == 0);
  REQUIRE(seed.prepare(f.service->gpu()));
  CHECK(f.files.provided(SEED_FAMILY_MODULE) == 1);
  ops::QuantArgs other_eps = seed_call(128);
  other_eps.eps = 1e-6f;
  const ops::QuantLaunch launched = seed.launch(f.service->gpu(), other_eps);
  CHECK_FALSE(launched.seed_path);
  CHECK(launched.kernel.loaded());
  CHECK(f.files.provided(SEED_FAMILY_MODULE) == 1);  // found in memory: nothing loaded during the call
  CHECK(seed.launch(f.service->gpu(), seed_call(128)).seed_path);
}

TEST_CASE("the seed variant: a row past the shared kernel's grid Y runs the family kernel, not a refusal") {
  // No twin here, so the seed's pick could only take the shared kernel, whose grid Y holds k/128 <= 65535.
  Fixture f({"NVIDIA A100", 8, 0, 108}, sm80());
  const ops::GroupQuant seed = f.service->group_quant(ops::QuantVariant{});
  REQUIRE(seed.available());
  const std::uint64_t k = 128ull * (ops::FP8_QUANT_MAX_GRID_Y + 1);
  CHECK_NOTHROW(ops::GroupQuant::check(ops::QuantVariant{}, seed_call(k)));
  const ops::QuantLaunch launched = seed.launch(f.service->gpu(), seed_call(k));
  CHECK_FALSE(launched.seed_path);
  CHECK(launched.kernel.loaded());
  CHECK(seed.launch(f.service->gpu(), seed_call(k - 128)).seed_path);  // the last row the seed kernels take
}

TEST_CASE("the seed variant without its family module: prepare says so, and such a call names the variant") {
  Fixture f;
  f.files.fail(SEED_FAMILY_MODULE);
  const ops::GroupQuant seed = f.service->group_quant(ops::QuantVariant{});
  REQUIRE(seed.available());
  CHECK_FALSE(seed.prepare(f.service->gpu()));
  CHECK(seed.launch(f.service->gpu(), seed_call(128)).seed_path);  // the seed's own calls still run
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
  CHECK(small.slots.one_group);
  CHECK(small.kernel != quant.kernel());
  call.m = 8192;
  const ops::QuantLaunch large = quant.launch(f.service->gpu(), call);
  CHECK_FALSE(large.slots.one_group);
  CHECK(large.kernel == quant.kernel());
  const ops::QuantLaunch forced = quant.launch_with(f.service->gpu(), call, true);
  CHECK(forced.slots.reason == ops::QuantSlotReason::chosen);
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
  CHECK(launched.slots.one_group);
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

// Broken environments around the module path: NVRTC failing or absent, and a device that goes
// away after kiln started using it (every driver call failing). kiln must answer with handle 0
// or a kiln::Error naming the call, log once, and neither crash nor leak.
#include <catch2/catch.hpp>

#include "runtime/module_provider.hpp"
#include "cache_test_support.hpp"
#include "runtime/cuda_backend.hpp"
#include "driver/primary_context.hpp"
#include "error_of.hpp"
#include "hostile_support.hpp"
#include "jit/compiler.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/service.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const KernelSource BROKEN{"broken_module", "common", {"broken_entry"},
                          "extern \"C\" __global__ void broken_entry() { this is not C++; }\n", "0"};

// Every call the module and launch paths make, failing from now on.
const char* const DEVICE_CALLS[] = {"cuCtxGetCurrent",    "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2",
                                    "cuModuleLoadDataEx", "cuModuleUnload",      "cuModuleGetFunction",
                                    "cuLaunchKernel",     "cuDevicePrimaryCtxRelease_v2"};

}  // namespace

TEST_CASE("NVRTC failing through the real provider: handle 0, logged once with the log, not retried") {
  FakeDriver::instance().reset();
  const driver::DriverApi api = FakeDriver::instance().api();
  TempDir tmp;
  auto disk = std::make_shared<DiskCache>(config_for(tmp.path()));
  const driver::PrimaryContext context(api, 0);

  Target target = sm90a();
  std::string expected;
  std::string module = BROKEN.module;
  std::string entry = BROKEN.entries[0];
  SECTION("a source that does not compile") { expected = "error"; }
  SECTION("an arch NVRTC does not know") {
    target = Target{{1, 0}, false, OutputKind::cubin};
    module = std::string(ops::FP8_QUANT_MODULE);
    entry = std::string(ops::FP8_QUANT_ENTRY);
    expected = "sm_10";
  }
  const auto lookup = [](std::string_view name) -> const KernelSource* {
    return name == BROKEN.module ? &BROKEN : find_module(name);
  };
  WarningCounter warnings;
  {
    ModuleCache cache(context, target, make_module_provider(disk, Compiler(false)), lookup);
    CHECK_FALSE(cache.kernel(module, entry).loaded());
    CHECK_FALSE(cache.kernel(module, entry).loaded());
    CHECK(cache.counters().failures == 1);
    CHECK(cache.counters().compiles == 0);  // a failed compile is a failure, not a compile
    CHECK_THROWS_AS(cache.resolve(KernelHandle{}), Error);
  }
  CHECK(disk->counters().compiles == 1);  // tried once, not on every call
  CHECK(disk->stats().entries == 0);      // nothing stored for a failed compile
  CHECK(warnings.count() == 1);
  CHECK_THAT(warnings.all(), Catch::Contains(module) && Catch::Contains(expected));
  CHECK(FakeDriver::instance().loads() == 0);
}

TEST_CASE("NVRTC absent: no target, every handle 0, the reason names NVRTC, nothing compiled") {
  FakeDriver::instance().reset();
  const driver::DriverApi api = FakeDriver::instance().api();
  FakeProvider provider;
  const auto no_nvrtc = [](const DeviceInfo& device, std::optional<Version> driver) {
    return select_target(TargetInputs{device.cc, {}, std::nullopt, driver});
  };
  CudaBackend backend(api, 0, provider.provider(), no_nvrtc);
  CHECK_FALSE(backend.available());
  CHECK_THAT(backend.unavailable_reason(), Catch::Contains("NVRTC is not available"));
  CHECK_FALSE(backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY).loaded());
  CHECK_FALSE(backend.try_target_kernel(ops::FP8_QUANT_HOPPER_MODULE, ops::FP8_QUANT_HOPPER_ENTRY).loaded());
  CHECK_THAT(error_of([&] { backend.launch(KernelHandle{1}, {}, {}, 0, nullptr, nullptr); }),
             Catch::Contains("cannot launch") && Catch::Contains("NVRTC"));
  CHECK_FALSE(ops::Fp8ActQuant::resolve(backend).available());
  CHECK(provider.provided() == 0);
}

TEST_CASE("a device that disappears: cached handles stay, new loads are 0, launches throw, teardown is quiet") {
  const CUresult gone = GENERATE(CUDA_ERROR_DEVICE_UNAVAILABLE, CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_UNKNOWN);
  CAPTURE(static_cast<int>(gone));
  FakeDriver::instance().reset();
  const driver::DriverApi api = FakeDriver::instance().api();
  FakeProvider provider;
  {
    CudaBackend backend(api, 0, provider.provider(), always(sm90a()));
    const KernelHandle loaded = backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY);
    REQUIRE(loaded.loaded());
    backend.launch(loaded, {1, 1, 1}, {128, 1, 1}, 0, nullptr, nullptr);
    REQUIRE(FakeDriver::instance().launches().size() == 1);

    for (const char* call : DEVICE_CALLS) FakeDriver::instance().fail_next(call, gone, 1000);
    WarningCounter warnings;
    CHECK(backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY) == loaded);
    CHECK_FALSE(backend.try_kernel(ops::FP8_QUANT_HOPPER_MODULE, ops::FP8_QUANT_HOPPER_ENTRY).loaded());
    CHECK_FALSE(backend.try_kernel(ops::FP8_QUANT_HOPPER_MODULE, ops::FP8_QUANT_HOPPER_ENTRY).loaded());
    // A vanished device is not a permanent failure: each request tries again (and fails), but the
    // warning is given once.
    CHECK(backend.counters().failures == 2);
    CHECK(backend.counters().load_refused == 0);  // not a bad image: nothing evicted
    CHECK(provider.evicted().empty());
    CHECK(warnings.count() == 1);

    // The launch fails on the first driver call it makes and says which.
    const std::string message = error_of([&] { backend.launch(loaded, {1, 1, 1}, {128, 1, 1}, 0, nullptr, nullptr); });
    CHECK_THAT(message, Catch::Contains("cuCtxGetCurrent failed"));
    CHECK(FakeDriver::instance().launches().size() == 1);

    // Only the launch itself failing (a sticky error after a kernel fault): the error names cuLaunchKernel.
    FakeDriver::instance().fail_next("cuCtxGetCurrent", gone, 0);
    FakeDriver::instance().fail_next("cuCtxPushCurrent_v2", gone, 0);
    FakeDriver::instance().fail_next("cuCtxPopCurrent_v2", gone, 0);
    try {
      backend.launch(loaded, {1, 1, 1}, {128, 1, 1}, 0, nullptr, nullptr);
      FAIL("launch on a failed device returned");
    } catch (const Error& e) {
      CHECK(e.context().call == "cuLaunchKernel");
      CHECK(e.context().module == ops::FP8_QUANT_MODULE);
    }
    CHECK_NOTHROW(backend.clear());  // unloading fails: warned, not thrown
    CHECK_FALSE(backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY).loaded());
  }  // the destructor's release fails too: warned, not thrown
  CHECK(FakeDriver::instance().calls("cuDevicePrimaryCtxRelease_v2") == 1);
}

TEST_CASE("the quantizer resolved on a device that fails every load has no kernels and refuses to launch") {
  FakeDriver::instance().reset();
  const driver::DriverApi api = FakeDriver::instance().api();
  FakeProvider provider;
  CudaBackend backend(api, 0, provider.provider(), always(sm90a()));
  FakeDriver::instance().fail_next("cuModuleLoadDataEx", CUDA_ERROR_DEVICE_UNAVAILABLE, 1000);
  const auto quant = ops::Fp8ActQuant::resolve(backend);
  CHECK_FALSE(quant.available());
  int dummy = 0;
  CHECK_THROWS_AS(quant.launch(backend, &dummy, &dummy, reinterpret_cast<float*>(&dummy), 1, 128, nullptr), Error);
  CHECK(FakeDriver::instance().launches().empty());
}

// CudaBackend and the driver table over a fake driver: devices, targets per device, handles,
// the Hopper twin, launches, refused handles, a missing driver, driver failures and leaks.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include "runtime/cuda_backend.hpp"
#include "driver/driver_api.hpp"
#include "driver/driver_check.hpp"
#include "fake_driver.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

using namespace kiln;
using namespace kiln::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

const std::string SHARED_MODULE(ops::FP8_QUANT_MODULE);
const std::string SHARED_ENTRY(ops::FP8_QUANT_ENTRY);
const std::string HOPPER_MODULE(ops::FP8_QUANT_HOPPER_MODULE);
const std::string HOPPER_ENTRY(ops::FP8_QUANT_HOPPER_ENTRY);

const FakeDevice H200{"NVIDIA H200", 9, 0, 132};
const FakeDevice A6000{"NVIDIA RTX A6000", 8, 6, 84};

// Exact-arch CUBIN, `a` from 9.0: the rule select_target applies when NVRTC knows the arch.
TargetChoice exact_arch(const DeviceInfo& device, std::optional<Version>) {
  return TargetChoice{Target{device.cc, device.cc.major >= 9, OutputKind::cubin}, "test: exact arch"};
}

TargetChoice no_target(const DeviceInfo&, std::optional<Version>) { return TargetChoice{std::nullopt, "test: none"}; }

struct Fixture {
  FakeDriver& fake = FakeDriver::instance();
  FakeProvider files;
  driver::DriverApi api;

  explicit Fixture(std::vector<FakeDevice> devices = {H200}) {
    fake.reset(std::move(devices));
    api = fake.api();
  }
  std::unique_ptr<CudaBackend> backend(int ordinal = 0) {
    return std::make_unique<CudaBackend>(api, ordinal, files.provider(), exact_arch);
  }
};

}  // namespace

TEST_CASE("a backend reads its device, picks its target and holds the primary context") {
  Fixture f;
  {
    auto gpu = f.backend();
    CHECK(gpu->available());
    CHECK(gpu->unavailable_reason().empty());
    CHECK(gpu->device().ordinal == 0);
    CHECK(gpu->device().name == "NVIDIA H200");
    CHECK(gpu->device().cc == ComputeCapability{9, 0});
    CHECK(gpu->device().sm_count == 132);
    REQUIRE(gpu->target());
    CHECK(gpu->target()->name() == "sm_90a");
    CHECK(gpu->target_reason() == "test: exact arch");
    CHECK(f.fake.retained(0) == 1);
  }
  CHECK(f.fake.retained(0) == 0);
}

TEST_CASE("handles are nonzero for a loaded kernel and 0 for a missing module or entry") {
  Fixture f;
  auto gpu = f.backend();
  const KernelHandle shared = gpu->try_kernel(SHARED_MODULE, SHARED_ENTRY);
  CHECK(shared.loaded());
  CHECK(try_kernel(*gpu, SHARED_MODULE, SHARED_ENTRY) == shared);
  CHECK_FALSE(gpu->try_kernel("no_such_module", SHARED_ENTRY).loaded());
  CHECK_FALSE(gpu->try_kernel(SHARED_MODULE, "no_such_entry").loaded());
  CHECK_FALSE(gpu->try_target_kernel("no_such_module", SHARED_ENTRY).loaded());
  CHECK(f.files.provided() == 1);
  const auto counts = gpu->counters();
  CHECK(counts.compiles == 1);
  CHECK(counts.memory_hits == 2);
}

TEST_CASE("devices of different archs get their own targets, and the twin only on Hopper") {
  Fixture f({H200, A6000});
  auto gpus = CudaBackend::all(f.api, f.files.provider(), exact_arch);
  REQUIRE(gpus.size() == 2);
  CudaBackend& hopper = *gpus[0];
  CudaBackend& ampere = *gpus[1];
  REQUIRE(hopper.target());
  REQUIRE(ampere.target());
  CHECK(hopper.target()->name() == "sm_90a");
  CHECK(ampere.target()->name() == "sm_86");
  CHECK(ampere.device().name == "NVIDIA RTX A6000");
  CHECK(ampere.device().sm_count == 84);

  CHECK_FALSE(ampere.try_target_kernel(HOPPER_MODULE, HOPPER_ENTRY).loaded());
  CHECK(f.files.provided(HOPPER_MODULE) == 0);  // not compiled at all
  CHECK(hopper.try_target_kernel(HOPPER_MODULE, HOPPER_ENTRY).loaded());
  CHECK(f.files.provided(HOPPER_MODULE) == 1);

  // The shared kernel is built once per device, each for its own target.
  CHECK(hopper.try_target_kernel(SHARED_MODULE, SHARED_ENTRY).loaded());
  CHECK(ampere.try_target_kernel(SHARED_MODULE, SHARED_ENTRY).loaded());
  CHECK(f.files.provided(SHARED_MODULE) == 2);
  CHECK(hopper.counters().compiles == 2);
  CHECK(ampere.counters().compiles == 1);
  CHECK(ampere.counters().disk_hits == 0);

  // The op sees the same split.
  CHECK(ops::Fp8ActQuant::resolve(hopper).twin_present());
  CHECK_FALSE(ops::Fp8ActQuant::resolve(ampere).twin_present());
  CHECK(ops::Fp8ActQuant::resolve(ampere).available());
  CHECK(ops::Fp8ActQuant::resolve(ampere).sm_count() == 84);
}

TEST_CASE("default_target_choice picks each device's arch from the linked NVRTC") {
  ::unsetenv("KILN_ARCH");
  DeviceInfo hopper;
  hopper.cc = {9, 0};
  DeviceInfo ampere;
  ampere.cc = {8, 6};
  const auto hopper_choice = default_target_choice(hopper, Version{13, 0});
  const auto ampere_choice = default_target_choice(ampere, Version{13, 0});
  REQUIRE(hopper_choice.target);
  REQUIRE(ampere_choice.target);
  CHECK(hopper_choice.target->name() == "sm_90a");
  CHECK(ampere_choice.target->name() == "sm_86");
  CHECK(hopper_choice.target->carries("hopper"));
  CHECK_FALSE(ampere_choice.target->carries("hopper"));
}

TEST_CASE("launch runs on the caller's stream in the device's context and restores the caller's") {
  Fixture f;
  auto gpu = f.backend();
  const KernelHandle kernel = gpu->try_kernel(SHARED_MODULE, SHARED_ENTRY);
  REQUIRE(kernel.loaded());
  int value = 7;
  void* args[] = {&value};
  void* stream = reinterpret_cast<void*>(std::uintptr_t{0x5000});

  CUcontext current = nullptr;
  REQUIRE(f.api.cuCtxPushCurrent_v2(FakeDriver::foreign_context()) == CUDA_SUCCESS);
  gpu->launch(kernel, Dim3{4, 3, 1}, Dim3{128, 1, 1}, 256, stream, args);
  REQUIRE(f.api.cuCtxGetCurrent(&current) == CUDA_SUCCESS);
  CHECK(current == FakeDriver::foreign_context());
  REQUIRE(f.api.cuCtxPopCurrent_v2(&current) == CUDA_SUCCESS);

  const auto launches = f.fake.launches();
  REQUIRE(launches.size() == 1);
  const FakeLaunch& launch = launches[0];
  CHECK(launch.module == SHARED_MODULE);
  CHECK(launch.entry == SHARED_ENTRY);
  CHECK(launch.grid[0] == 4);
  CHECK(launch.grid[1] == 3);
  CHECK(launch.grid[2] == 1);
  CHECK(launch.block[0] == 128);
  CHECK(launch.shared_bytes == 256);
  CHECK(launch.stream == static_cast<CUstream>(stream));
  CHECK(launch.args == args);
  CHECK(launch.context == FakeDriver::context_of(0));
}

TEST_CASE("launch pushes nothing when the device's context is already current") {
  Fixture f;
  auto gpu = f.backend();
  const KernelHandle kernel = gpu->try_kernel(SHARED_MODULE, SHARED_ENTRY);
  REQUIRE(kernel.loaded());
  REQUIRE(f.api.cuCtxPushCurrent_v2(FakeDriver::context_of(0)) == CUDA_SUCCESS);
  const int pushes = f.fake.calls("cuCtxPushCurrent_v2");
  gpu->launch(kernel, Dim3{}, Dim3{}, 0, nullptr, nullptr);
  CHECK(f.fake.calls("cuCtxPushCurrent_v2") == pushes);
  CHECK(f.fake.launches().size() == 1);
  CUcontext popped = nullptr;
  REQUIRE(f.api.cuCtxPopCurrent_v2(&popped) == CUDA_SUCCESS);
}

TEST_CASE("launch refuses handle 0 and another device's handle, and reports driver failures") {
  Fixture f({H200, H200});
  auto gpu0 = f.backend(0);
  auto gpu1 = f.backend(1);
  const KernelHandle on0 = gpu0->try_kernel(SHARED_MODULE, SHARED_ENTRY);
  const KernelHandle on1 = gpu1->try_kernel(SHARED_MODULE, SHARED_ENTRY);
  REQUIRE(on0.loaded());
  REQUIRE(on1.loaded());

  CHECK_THROWS_WITH(gpu0->launch(on1, Dim3{}, Dim3{}, 0, nullptr, nullptr),
                    Contains("handle was not returned by this backend (device 0)"));
  CHECK_THROWS_WITH(gpu1->launch(on0, Dim3{}, Dim3{}, 0, nullptr, nullptr),
                    Contains("handle was not returned by this backend (device 1)"));
  CHECK_THROWS_WITH(gpu0->launch(KernelHandle{}, Dim3{}, Dim3{}, 0, nullptr, nullptr), Contains("kernel handle is 0"));
  CHECK(f.fake.calls("cuLaunchKernel") == 0);

  f.fake.fail_next("cuLaunchKernel", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  try {
    gpu0->launch(on0, Dim3{}, Dim3{1024, 2, 1}, 0, nullptr, nullptr);
    FAIL("the driver's launch failure was swallowed");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) ==
          "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources requested for launch)");
    CHECK(error.context().call == "cuLaunchKernel");
    CHECK(error.context().module == SHARED_MODULE);
    CHECK(error.context().target == "sm_90a");
  }
  CHECK(f.fake.launches().empty());

  gpu0->clear();
  CHECK_THROWS_WITH(gpu0->launch(on0, Dim3{}, Dim3{}, 0, nullptr, nullptr), Contains("stale"));
  gpu1->launch(on1, Dim3{}, Dim3{}, 0, nullptr, nullptr);
  CHECK(f.fake.launches().size() == 1);
}

TEST_CASE("a PDL launch uses cuLaunchKernelEx with programmatic stream serialization on sm_90+ only") {
  const LaunchOptions pdl{true};
  void* stream = reinterpret_cast<void*>(std::uintptr_t{0x5000});
  SECTION("H200: the attribute is set, grid, block, bytes and stream as asked") {
    Fixture f;
    auto gpu = f.backend();
    const KernelHandle kernel = gpu->try_kernel(SHARED_MODULE, SHARED_ENTRY);
    REQUIRE(kernel.loaded());
    CHECK(gpu->launches_dependent(pdl));
    CHECK_FALSE(gpu->launches_dependent(LaunchOptions{}));
    gpu->launch(kernel, Dim3{4, 3, 2}, Dim3{128, 2, 1}, 64, stream, nullptr, pdl);
    gpu->launch(kernel, Dim3{1, 1, 1}, Dim3{128, 1, 1}, 0, stream, nullptr);
    CHECK(f.fake.calls("cuLaunchKernelEx") == 1);
    CHECK(f.fake.calls("cuLaunchKernel") == 1);
    const auto launches = f.fake.launches();
    REQUIRE(launches.size() == 2);
    CHECK(launches[0].dependent);
    CHECK(launches[0].grid[0] == 4);
    CHECK(launches[0].grid[1] == 3);
    CHECK(launches[0].grid[2] == 2);
    CHECK(launches[0].block[1] == 2);
    CHECK(launches[0].shared_bytes == 64);
    CHECK(launches[0].stream == static_cast<CUstream>(stream));
    CHECK(launches[0].context == FakeDriver::context_of(0));
    CHECK_FALSE(launches[1].dependent);

    f.fake.fail_next("cuLaunchKernelEx", CUDA_ERROR_INVALID_VALUE);
    CHECK_THROWS_WITH(gpu->launch(kernel, Dim3{}, Dim3{}, 0, nullptr, nullptr, pdl), StartsWith("cuLaunchKernelEx failed"));
  }
  SECTION("an sm_86 device launches plainly: PDL needs sm_90") {
    Fixture f({A6000});
    auto gpu = f.backend();
    const KernelHandle kernel = gpu->try_kernel(SHARED_MODULE, SHARED_ENTRY);
    REQUIRE(kernel.loaded());
    CHECK_FALSE(gpu->launches_dependent(pdl));
    gpu->launch(kernel, Dim3{}, Dim3{}, 0, nullptr, nullptr, pdl);
    CHECK(f.fake.calls("cuLaunchKernelEx") == 0);
    REQUIRE(f.fake.launches().size() == 1);
    CHECK_FALSE(f.fake.launches()[0].dependent);
  }
  SECTION("a driver without cuLaunchKernelEx (before CUDA 12.0) launches plainly") {
    Fixture f;
    f.api.cuLaunchKernelEx = nullptr;
    auto gpu = f.backend();
    const KernelHandle kernel = gpu->try_kernel(SHARED_MODULE, SHARED_ENTRY);
    REQUIRE(kernel.loaded());
    CHECK_FALSE(gpu->launches_dependent(pdl));
    gpu->launch(kernel, Dim3{}, Dim3{}, 0, nullptr, nullptr, pdl);
    REQUIRE(f.fake.launches().size() == 1);
    CHECK_FALSE(f.fake.launches()[0].dependent);
  }
}

TEST_CASE("without a driver every handle is 0 and the reason is clear") {
  FakeDriver::instance().reset();
  const auto api = FakeDriver::missing();
  CHECK_FALSE(api.loaded);
  CHECK_THAT(api.load_error, StartsWith("libcuda-kiln-test-missing.so.1 not found") &&
                                 Contains("no NVIDIA driver; GPU paths are unavailable"));
  FakeProvider files;
  CudaBackend gpu(api, 0, files.provider(), exact_arch);
  CHECK_FALSE(gpu.available());
  CHECK(gpu.unavailable_reason() == api.load_error);
  CHECK_FALSE(gpu.target());
  CHECK_FALSE(gpu.try_kernel(SHARED_MODULE, SHARED_ENTRY).loaded());
  CHECK_FALSE(gpu.try_target_kernel(HOPPER_MODULE, HOPPER_ENTRY).loaded());
  CHECK_FALSE(ops::Fp8ActQuant::resolve(gpu).available());
  CHECK(files.provided() == 0);
  CHECK_THROWS_WITH(gpu.launch(KernelHandle{1}, Dim3{}, Dim3{}, 0, nullptr, nullptr),
                    Contains("cannot launch on device 0") && Contains("no NVIDIA driver"));
  CHECK(gpu.counters().compiles == 0);
  CHECK(CudaBackend::all(api, files.provider(), exact_arch).empty());

  const DriverStatus status = driver_status(api);
  CHECK_FALSE(status.available);
  CHECK(status.reason == api.load_error);
  CHECK(status.devices.empty());
}

TEST_CASE("the process driver table loads once and never throws") {
  const driver::DriverApi& first = driver::driver_api();
  CHECK(&first == &driver::driver_api());
  if (!first.loaded) CHECK_THAT(first.load_error, Contains("GPU paths are unavailable"));
  const DriverStatus status = driver_status();
  CHECK(status.available == first.loaded);
}

TEST_CASE("the toolkit's link stub is recognised, not taken for a driver") {
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) return;  // Why: only where the toolkit ships the stub
  const auto api = driver::load_driver_api(stub.c_str());
  CHECK_FALSE(api.loaded);
  CHECK(api.load_error == stub + " is the CUDA toolkit's link stub, not an NVIDIA driver "
                                 "(cuInit: CUDA_ERROR_STUB_LIBRARY); GPU paths are unavailable");
}

TEST_CASE("driver results become errors naming the call and the driver's words") {
  Fixture f;
  try {
    driver::check(f.api, CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData");
    FAIL("check did not throw");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) == "cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)");
    CHECK(error.context().call == "cuModuleLoadData");
  }
  CHECK_NOTHROW(driver::check(f.api, CUDA_SUCCESS, "cuInit"));
  CHECK(driver::result_text(f.api, static_cast<CUresult>(9999)) == "CUresult 9999 (unknown)");
  CHECK(driver::result_text(driver::DriverApi{}, CUDA_ERROR_INVALID_IMAGE) == "CUresult 200 (unknown)");
}

TEST_CASE("a driver failure while opening a device leaves it unavailable, never thrown") {
  Fixture f;
  SECTION("retaining the primary context fails") {
    f.fake.fail_next("cuDevicePrimaryCtxRetain", CUDA_ERROR_OUT_OF_MEMORY);
    auto gpu = f.backend();
    CHECK_FALSE(gpu->available());
    CHECK(gpu->unavailable_reason() == "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
    CHECK_FALSE(gpu->try_kernel(SHARED_MODULE, SHARED_ENTRY).loaded());
    CHECK(f.fake.retained(0) == 0);
  }
  SECTION("counting devices fails") {
    f.fake.fail_next("cuDeviceGetCount", CUDA_ERROR_NOT_INITIALIZED);
    CHECK_THAT(f.backend()->unavailable_reason(), StartsWith("cuDeviceGetCount failed: CUDA_ERROR_NOT_INITIALIZED"));
    f.fake.fail_next("cuDeviceGetCount", CUDA_ERROR_NOT_INITIALIZED);
    CHECK(CudaBackend::all(f.api, f.files.provider(), exact_arch).empty());
    f.fake.fail_next("cuDeviceGetCount", CUDA_ERROR_NOT_INITIALIZED);
    CHECK_THAT(driver_status(f.api).reason, StartsWith("cuDeviceGetCount failed"));
  }
  SECTION("reading an attribute fails") {
    f.fake.fail_next("cuDeviceGetAttribute", CUDA_ERROR_INVALID_VALUE);
    CHECK_THAT(f.backend()->unavailable_reason(), StartsWith("cuDeviceGetAttribute failed: CUDA_ERROR_INVALID_VALUE"));
  }
  CHECK(f.files.provided() == 0);
}

TEST_CASE("a bad ordinal is an invalid argument") {
  Fixture f({H200, A6000});
  CHECK_THROWS_WITH(f.backend(2), Contains("'ordinal'") && Contains("below 2") && Contains("got 2"));
  CHECK_THROWS_WITH(f.backend(-1), Contains("'ordinal'"));
  CHECK(f.fake.retained(0) == 0);
}

TEST_CASE("a device without a target has every handle 0 and says why") {
  Fixture f;
  CudaBackend gpu(f.api, 0, f.files.provider(), no_target);
  CHECK_FALSE(gpu.available());
  CHECK(gpu.device().name == "NVIDIA H200");
  CHECK_FALSE(gpu.target());
  CHECK(gpu.target_reason() == "test: none");
  CHECK_THAT(gpu.unavailable_reason(), Contains("no compile target for device 0") && Contains("test: none"));
  CHECK_FALSE(gpu.try_kernel(SHARED_MODULE, SHARED_ENTRY).loaded());
  CHECK(f.files.provided() == 0);
}

TEST_CASE("driver_status lists the devices and the driver version") {
  Fixture f({H200, A6000});
  const DriverStatus status = driver_status(f.api);
  CHECK(status.available);
  CHECK(status.reason.empty());
  REQUIRE(status.version);
  CHECK(status.version->str() == "13.0");
  REQUIRE(status.devices.size() == 2);
  CHECK(status.devices[1].ordinal == 1);
  CHECK(status.devices[1].cc == ComputeCapability{8, 6});
}

TEST_CASE("a module that fails to compile is 0, tried once, and tried again after clear()") {
  Fixture f;
  f.files.fail(SHARED_MODULE);
  auto gpu = f.backend();
  for (int i = 0; i < 100; ++i) CHECK_FALSE(gpu->try_kernel(SHARED_MODULE, SHARED_ENTRY).loaded());
  CHECK(f.files.provided(SHARED_MODULE) == 1);
  CHECK(gpu->counters().failures == 1);
  CHECK(gpu->counters().memory_hits == 99);
  CHECK(gpu->try_target_kernel(HOPPER_MODULE, HOPPER_ENTRY).loaded());
  gpu->clear();
  CHECK_FALSE(gpu->try_kernel(SHARED_MODULE, SHARED_ENTRY).loaded());
  CHECK(f.files.provided(SHARED_MODULE) == 2);
}

TEST_CASE("creating and destroying backends 1,000 times with loads leaks no module or context") {
  Fixture f({H200, A6000});
  for (int i = 0; i < 1000; ++i) {
    auto gpus = CudaBackend::all(f.api, f.files.provider(), exact_arch);
    REQUIRE(gpus.size() == 2);
    REQUIRE(gpus[0]->try_kernel(SHARED_MODULE, SHARED_ENTRY).loaded());
    REQUIRE(gpus[0]->try_target_kernel(HOPPER_MODULE, HOPPER_ENTRY).loaded());
    REQUIRE(gpus[1]->try_kernel(SHARED_MODULE, SHARED_ENTRY).loaded());
    if (i % 2 == 0) gpus[1]->clear();
  }
  CHECK(f.fake.loads() == 3000);
  CHECK(f.fake.unloads() == 3000);
  CHECK(f.fake.live_modules() == 0);
  CHECK(f.fake.retained(0) == 0);
  CHECK(f.fake.retained(1) == 0);
  CHECK(f.files.provided() == 3000);
}

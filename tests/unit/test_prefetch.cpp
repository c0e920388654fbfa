// The prefetching provider: every module starts at once on its own thread, the first request takes
// the result, everything else goes to the inner provider; and CudaBackend prefetching over the
// fake driver.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "runtime/prefetch.hpp"
#include "runtime/cuda_backend.hpp"
#include "fake_driver.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const Target SM_90A{{9, 0}, true, OutputKind::cubin};
const Target SM_86{{8, 6}, false, OutputKind::cubin};
const std::string SHARED(ops::FP8_QUANT_MODULE);
const std::string HOPPER(ops::FP8_QUANT_HOPPER_MODULE);

const KernelSource& source(const std::string& module) {
  const KernelSource* found = find_module(module);
  REQUIRE(found != nullptr);
  return *found;
}

// Counts provide() calls that have started; each waits (up to 10 s) for `expected` to have started,
// so a provider that ran them one after another would time out and say so.
struct StartLatch {
  std::mutex mutex;
  std::condition_variable changed;
  int started = 0;
  int expected = 0;
  bool timed_out = false;

  void arrive() {
    std::unique_lock<std::mutex> lock(mutex);
    ++started;
    changed.notify_all();
    if (!changed.wait_for(lock, std::chrono::seconds(10), [&] { return started >= expected; })) timed_out = true;
  }
  bool wait_for_all() {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(10), [&] { return started >= expected; });
  }
};

}  // namespace

TEST_CASE("carried_modules: common everywhere, hopper only on sm_90a") {
  const auto hopper = carried_modules(SM_90A);
  const auto ampere = carried_modules(SM_86);
  CHECK(hopper.size() == embedded_modules().size());
  REQUIRE(ampere.size() == hopper.size() - 1);
  for (const KernelSource* module : ampere) CHECK(module->family == "common");
}

TEST_CASE("a prefetch starts every module at once, each on its own thread, before anyone asks") {
  FakeProvider files;
  StartLatch latch;
  latch.expected = 2;
  files.on_provide([&](const KernelSource&) { latch.arrive(); });
  const ModuleProvider provider = prefetching_provider(files.provider(), SM_90A, carried_modules(SM_90A));
  CHECK(latch.wait_for_all());
  CHECK_FALSE(latch.timed_out);
  CHECK(files.provided() == 2);
}

TEST_CASE("the first request takes the prefetched result; later requests, other modules and targets go inside") {
  FakeProvider files;
  const ModuleProvider provider = prefetching_provider(files.provider(), SM_90A, {&source(SHARED)});
  const ProvidedModule first = provider.provide(source(SHARED), SM_90A);
  CHECK(first.module.module == SHARED);
  CHECK(first.module.target == SM_90A);
  CHECK(files.provided(SHARED) == 1);  // the prefetch's call, taken
  provider.provide(source(SHARED), SM_90A);
  CHECK(files.provided(SHARED) == 2);
  provider.provide(source(HOPPER), SM_90A);  // not prefetched
  CHECK(files.provided(HOPPER) == 1);
  const ProvidedModule other = provider.provide(source(SHARED), SM_86);
  CHECK(other.module.target == SM_86);
  CHECK(files.provided(SHARED) == 3);
}

TEST_CASE("a prefetch for another target is never handed out") {
  FakeProvider files;
  const ModuleProvider provider = prefetching_provider(files.provider(), SM_86, {&source(SHARED)});
  CHECK(provider.provide(source(SHARED), SM_90A).module.target == SM_90A);
  // The prefetch for sm_86 still ran (and is waited for when the provider goes).
}

TEST_CASE("a failed prefetch is rethrown to its first requester; the next request compiles again") {
  FakeProvider files;
  files.fail(HOPPER);
  const ModuleProvider provider = prefetching_provider(files.provider(), SM_90A, {&source(HOPPER)});
  CHECK_THROWS_AS(provider.provide(source(HOPPER), SM_90A), Error);
  CHECK_THROWS_AS(provider.provide(source(HOPPER), SM_90A), Error);
  CHECK(files.provided(HOPPER) == 2);
}

TEST_CASE("a prefetching backend provides each carried module once, and its handles work") {
  FakeDriver& fake = FakeDriver::instance();
  fake.reset();
  const driver::DriverApi api = fake.api();  // the backends keep a reference
  FakeProvider files;
  const auto exact = [](const DeviceInfo& device, std::optional<Version>) {
    return TargetChoice{Target{device.cc, device.cc.major >= 9, OutputKind::cubin}, "test: exact arch"};
  };
  {
    CudaBackend gpu(api, 0, files.provider(), exact, true);
    REQUIRE(gpu.available());
    CHECK(gpu.try_kernel(SHARED, ops::FP8_QUANT_ENTRY).loaded());
    CHECK(gpu.try_target_kernel(HOPPER, ops::FP8_QUANT_HOPPER_ENTRY).loaded());
    CHECK(gpu.try_kernel(SHARED, ops::FP8_QUANT_ENTRY).loaded());
    CHECK(files.provided() == 2);
    const auto counters = gpu.counters();
    CHECK(counters.compiles + counters.disk_hits == 2);
  }
  // With the primary context already held (as by the CUDA runtime), retaining is instant: nothing
  // is prefetched, modules are provided on request.
  {
    CudaBackend holder(api, 0, files.provider(), exact, false);
    FakeProvider later;
    CudaBackend gpu(api, 0, later.provider(), exact, true);
    REQUIRE(gpu.available());
    CHECK(later.provided() == 0);
    CHECK(gpu.try_kernel(SHARED, ops::FP8_QUANT_ENTRY).loaded());
    CHECK(later.provided() == 1);
  }
  // Without a target nothing is prefetched.
  FakeProvider idle;
  const auto none = [](const DeviceInfo&, std::optional<Version>) { return TargetChoice{std::nullopt, "test: none"}; };
  {
    CudaBackend gpu(api, 0, idle.provider(), none, true);
    CHECK_FALSE(gpu.available());
  }
  CHECK(idle.provided() == 0);
}

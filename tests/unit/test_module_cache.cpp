// The per-device memory cache over a fake driver: handles, single flight, failures, refused
// binaries, clear(), contexts and exact counters.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "runtime/module_cache.hpp"
#include "driver/primary_context.hpp"
#include "fake_driver.hpp"
#include "kiln/error.hpp"

using namespace kiln;
using namespace kiln::test;
using Catch::Matchers::Contains;

namespace {

const Target SM_90A{{9, 0}, true, OutputKind::cubin};

KernelSource module_source(const std::string& name, std::vector<std::string> entries,
                           const std::string& family = "common") {
  KernelSource source;
  source.module = name;
  source.family = family;
  source.entries = std::move(entries);
  source.text = "// fake";
  return source;
}

const KernelSource ALPHA = module_source("alpha", {"alpha_one", "alpha_two"});
const KernelSource BETA = module_source("beta", {"beta_one"});
const KernelSource TWIN = module_source("twin", {"twin_one"}, "hopper");

const KernelSource* test_sources(std::string_view module) {
  for (const auto* source : {&ALPHA, &BETA, &TWIN})
    if (source->module == module) return source;
  return nullptr;
}

// One device's context and cache over the fake driver, torn down in order.
struct Fixture {
  FakeDriver& fake = FakeDriver::instance();
  FakeProvider files;
  driver::DriverApi api;
  std::unique_ptr<driver::PrimaryContext> context;
  std::unique_ptr<ModuleCache> cache;

  explicit Fixture(Target target = SM_90A) {
    fake.reset();
    api = fake.api();
    context = std::make_unique<driver::PrimaryContext>(api, 0);
    cache = std::make_unique<ModuleCache>(*context, target, files.provider(), test_sources);
  }
};

void check_counters(const ModuleCacheCounters& got, const ModuleCacheCounters& want) {
  CHECK(got.memory_hits == want.memory_hits);
  CHECK(got.lock_waits == want.lock_waits);
  CHECK(got.disk_hits == want.disk_hits);
  CHECK(got.compiles == want.compiles);
  CHECK(got.compile_ms == Approx(want.compile_ms));
  CHECK(got.load_refused == want.load_refused);
  CHECK(got.failures == want.failures);
}

ModuleCacheCounters counters(std::uint64_t memory_hits, std::uint64_t lock_waits, std::uint64_t disk_hits,
                             std::uint64_t compiles, std::uint64_t load_refused, std::uint64_t failures) {
  return ModuleCacheCounters{memory_hits, lock_waits, disk_hits, compiles, 2.5 * static_cast<double>(compiles),
                             load_refused, failures};
}

}  // namespace

TEST_CASE("a loaded module gives one stable nonzero handle per entry") {
  Fixture f;
  const KernelHandle one = f.cache->kernel("alpha", "alpha_one");
  const KernelHandle two = f.cache->kernel("alpha", "alpha_two");
  REQUIRE(one.loaded());
  REQUIRE(two.loaded());
  CHECK(one != two);
  CHECK(f.cache->kernel("alpha", "alpha_one") == one);
  CHECK(f.files.provided("alpha") == 1);
  CHECK(f.fake.loads() == 1);
  check_counters(f.cache->counters(), counters(2, 0, 0, 1, 0, 0));

  const LoadedKernel loaded = f.cache->resolve(two);
  CHECK(loaded.function != nullptr);
  CHECK(loaded.module == "alpha");
  CHECK(loaded.entry == "alpha_two");
  CHECK(f.cache->device() == 0);
  CHECK(f.cache->target() == SM_90A);
}

TEST_CASE("an entry the module does not declare is 0 without loading anything") {
  Fixture f;
  CHECK_FALSE(f.cache->kernel("beta", "no_such_entry").loaded());
  CHECK(f.files.provided() == 0);
  CHECK(f.fake.calls("cuModuleLoadDataEx") == 0);
  REQUIRE(f.cache->kernel("beta", "beta_one").loaded());
  CHECK_FALSE(f.cache->kernel("beta", "no_such_entry").loaded());
  CHECK(f.files.provided() == 1);
}

TEST_CASE("an unknown module is 0 without loading anything") {
  Fixture f;
  CHECK_FALSE(f.cache->kernel("no_such_module", "alpha_one").loaded());
  CHECK(f.files.provided() == 0);
}

TEST_CASE("a family the target does not carry is 0 under carried_by_target, without compiling") {
  Fixture f(Target{{8, 6}, false, OutputKind::cubin});
  CHECK_FALSE(f.cache->kernel("twin", "twin_one", FamilyRule::carried_by_target).loaded());
  CHECK(f.files.provided() == 0);
  CHECK(f.cache->kernel("alpha", "alpha_one", FamilyRule::carried_by_target).loaded());
  // Loaded on request regardless of family, the module still is not handed out under the rule.
  CHECK(f.cache->kernel("twin", "twin_one").loaded());
  CHECK_FALSE(f.cache->kernel("twin", "twin_one", FamilyRule::carried_by_target).loaded());
  CHECK(f.files.provided() == 2);
}

TEST_CASE("a family the target carries loads under carried_by_target") {
  Fixture f;
  CHECK(f.cache->kernel("twin", "twin_one", FamilyRule::carried_by_target).loaded());
}

TEST_CASE("a binary from disk is a disk hit, not a compile") {
  Fixture f;
  f.files.put_on_disk("alpha", "sm_90a");
  REQUIRE(f.cache->kernel("alpha", "alpha_one").loaded());
  check_counters(f.cache->counters(), counters(0, 0, 1, 0, 0, 0));
}

TEST_CASE("a PTX target loads the PTX") {
  Fixture f(Target{{12, 0}, false, OutputKind::ptx});
  CHECK(f.cache->kernel("alpha", "alpha_one").loaded());
}

TEST_CASE("a failed compile is remembered as failed until clear()") {
  Fixture f;
  f.files.fail("alpha");
  for (int i = 0; i < 100; ++i) CHECK_FALSE(f.cache->kernel("alpha", "alpha_one").loaded());
  CHECK(f.files.provided("alpha") == 1);
  check_counters(f.cache->counters(), counters(99, 0, 0, 0, 0, 1));
  // Another module is not affected.
  CHECK(f.cache->kernel("beta", "beta_one").loaded());

  f.cache->clear();
  CHECK_FALSE(f.cache->kernel("alpha", "alpha_one").loaded());
  CHECK(f.files.provided("alpha") == 2);
  CHECK(f.cache->counters().failures == 2);
}

TEST_CASE("an entry missing from the image fails the module and unloads it") {
  Fixture f;
  f.files.export_only("alpha", {"alpha_one"});
  CHECK_FALSE(f.cache->kernel("alpha", "alpha_one").loaded());
  CHECK(f.fake.loads() == 1);
  CHECK(f.fake.unloads() == 1);
  CHECK(f.fake.live_modules() == 0);
  check_counters(f.cache->counters(), counters(0, 0, 0, 1, 0, 1));
}

TEST_CASE("a provider that returns another target's binary fails the module") {
  FakeDriver& fake = FakeDriver::instance();
  fake.reset();
  const auto api = fake.api();
  driver::PrimaryContext context(api, 0);
  FakeProvider files;
  ModuleProvider wrong = files.provider();
  wrong.provide = [inner = wrong.provide](const KernelSource& source, const Target&) {
    return inner(source, Target{{8, 6}, false, OutputKind::cubin});
  };
  ModuleCache cache(context, SM_90A, wrong, test_sources);
  CHECK_FALSE(cache.kernel("alpha", "alpha_one").loaded());
  CHECK(fake.loads() == 0);
  CHECK(cache.counters().failures == 1);
}

TEST_CASE("16 threads asking for one module compile it once and share the handle") {
  Fixture f;
  constexpr int THREADS = 16;
  // The compile finishes only once the other 15 are waiting on it, so every one of them must wait.
  bool all_waited = false;
  f.files.on_provide([&](const KernelSource&) {
    all_waited = eventually([&] { return f.cache->counters().lock_waits == THREADS - 1; });
  });
  std::vector<KernelHandle> handles(THREADS);
  std::vector<std::thread> threads;
  for (int i = 0; i < THREADS; ++i)
    threads.emplace_back([&, i] { handles[static_cast<std::size_t>(i)] = f.cache->kernel("alpha", "alpha_two"); });
  for (auto& thread : threads) thread.join();

  CHECK(all_waited);
  CHECK(f.files.provided("alpha") == 1);
  CHECK(f.fake.loads() == 1);
  REQUIRE(handles[0].loaded());
  for (const auto& handle : handles) CHECK(handle == handles[0]);
  check_counters(f.cache->counters(), counters(0, THREADS - 1, 0, 1, 0, 0));
}

TEST_CASE("a slow compile of one module does not block another module") {
  Fixture f;
  std::promise<void> slow_entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> slow_done{false};
  f.files.on_provide([&](const KernelSource& source) {
    if (source.module != "alpha") return;
    slow_entered.set_value();
    released.wait_for(std::chrono::seconds(20));  // bounded, so that a failing check cannot hang the test
  });
  KernelHandle slow;
  std::thread loader([&] {
    slow = f.cache->kernel("alpha", "alpha_one");
    slow_done = true;
  });
  const bool entered = slow_entered.get_future().wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (!entered) {  // the loader released and joined first, so that the failing REQUIRE leaves no thread
    release.set_value();
    loader.join();
  }
  REQUIRE(entered);

  const KernelHandle fast = f.cache->kernel("beta", "beta_one");
  CHECK(fast.loaded());
  CHECK_FALSE(slow_done.load());  // beta loaded while alpha was still compiling

  release.set_value();
  loader.join();
  CHECK(slow.loaded());
  check_counters(f.cache->counters(), counters(0, 0, 0, 2, 0, 0));
}

TEST_CASE("a binary from disk that the driver refuses is evicted and compiled once") {
  Fixture f;
  f.files.put_on_disk("alpha", "sm_90a");
  f.fake.fail_next("cuModuleLoadDataEx", CUDA_ERROR_INVALID_IMAGE);
  CHECK(f.cache->kernel("alpha", "alpha_one").loaded());
  CHECK(f.files.provided("alpha") == 2);
  CHECK(f.files.evicted() == std::vector<std::string>{"alpha"});
  check_counters(f.cache->counters(), counters(0, 0, 1, 1, 1, 0));
}

TEST_CASE("a binary the driver refuses twice is failed and not tried again") {
  Fixture f;
  f.files.put_on_disk("alpha", "sm_90a");
  f.fake.fail_next("cuModuleLoadDataEx", CUDA_ERROR_NO_BINARY_FOR_GPU, 2);
  CHECK_FALSE(f.cache->kernel("alpha", "alpha_one").loaded());
  CHECK_FALSE(f.cache->kernel("alpha", "alpha_one").loaded());
  CHECK(f.files.provided("alpha") == 2);
  CHECK(f.files.evicted() == std::vector<std::string>{"alpha", "alpha"});
  CHECK(f.fake.calls("cuModuleLoadDataEx") == 2);
  check_counters(f.cache->counters(), counters(1, 0, 1, 1, 2, 1));
}

TEST_CASE("a fresh compile the driver refuses is evicted but not compiled again") {
  Fixture f;
  f.fake.fail_next("cuModuleLoadDataEx", CUDA_ERROR_INVALID_PTX);
  CHECK_FALSE(f.cache->kernel("alpha", "alpha_one").loaded());
  CHECK(f.files.provided("alpha") == 1);
  CHECK(f.files.evicted() == std::vector<std::string>{"alpha"});
  check_counters(f.cache->counters(), counters(0, 0, 0, 1, 1, 1));
}

TEST_CASE("a load failure that is not a bad image keeps the disk entry") {
  Fixture f;
  f.files.put_on_disk("alpha", "sm_90a");
  f.fake.fail_next("cuModuleLoadDataEx", CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_FALSE(f.cache->kernel("alpha", "alpha_one").loaded());
  CHECK(f.files.evicted().empty());
  check_counters(f.cache->counters(), counters(0, 0, 1, 0, 0, 1));
}

TEST_CASE("resolve refuses 0, another cache's handle, a forged handle and a cleared one") {
  Fixture f;
  const auto api = f.api;
  driver::PrimaryContext other_context(api, 0);
  FakeProvider other_files;
  ModuleCache other(other_context, SM_90A, other_files.provider(), test_sources);

  const KernelHandle mine = f.cache->kernel("alpha", "alpha_one");
  const KernelHandle theirs = other.kernel("alpha", "alpha_one");
  REQUIRE(mine.loaded());
  REQUIRE(theirs.loaded());
  CHECK(mine != theirs);

  CHECK_THROWS_WITH(f.cache->resolve(KernelHandle{}), Contains("kernel handle is 0"));
  CHECK_THROWS_WITH(f.cache->resolve(theirs), Contains("handle was not returned by this backend (device 0)"));
  CHECK_THROWS_WITH(f.cache->resolve(KernelHandle{mine.raw + 1000}), Contains("was not returned by this backend"));
  try {
    f.cache->resolve(theirs);
    FAIL("a foreign handle resolved");
  } catch (const Error& error) {
    CHECK(error.context().call == "launch");
  }

  f.cache->clear();
  CHECK(f.fake.unloads() == 1);
  CHECK_THROWS_WITH(f.cache->resolve(mine), Contains("is stale") && Contains("alpha"));
  const KernelHandle again = f.cache->kernel("alpha", "alpha_one");
  REQUIRE(again.loaded());
  CHECK(again != mine);
  CHECK(f.cache->resolve(again).entry == "alpha_one");
  CHECK(f.fake.loads() == 3);  // alpha here twice, alpha in the other cache once
}

TEST_CASE("modules load in the device's primary context and the caller's context comes back") {
  Fixture f;
  CUcontext current = nullptr;
  REQUIRE(f.api.cuCtxPushCurrent_v2(FakeDriver::foreign_context()) == CUDA_SUCCESS);
  // The fake refuses a load with no current context; the cache pushes its own.
  CHECK(f.cache->kernel("alpha", "alpha_one").loaded());
  REQUIRE(f.api.cuCtxGetCurrent(&current) == CUDA_SUCCESS);
  CHECK(current == FakeDriver::foreign_context());
  REQUIRE(f.api.cuCtxPopCurrent_v2(&current) == CUDA_SUCCESS);

  f.cache->clear();
  REQUIRE(f.api.cuCtxGetCurrent(&current) == CUDA_SUCCESS);
  CHECK(current == nullptr);
  CHECK(f.fake.calls("cuCtxPushCurrent_v2") == 3);  // the test's push, the load, the unload
  CHECK(f.fake.calls("cuCtxPopCurrent_v2") == 3);
}

TEST_CASE("a driver failure making the context current is a failed module, not an exception") {
  Fixture f;
  f.fake.fail_next("cuCtxPushCurrent_v2", CUDA_ERROR_INVALID_CONTEXT);
  CHECK_FALSE(f.cache->kernel("alpha", "alpha_one").loaded());
  CHECK(f.fake.loads() == 0);
  CHECK(f.cache->counters().failures == 1);
}

TEST_CASE("clear() unloads every module and destruction unloads the rest") {
  Fixture f;
  REQUIRE(f.cache->kernel("alpha", "alpha_one").loaded());
  REQUIRE(f.cache->kernel("beta", "beta_one").loaded());
  CHECK(f.fake.live_modules() == 2);
  f.cache->clear();
  CHECK(f.fake.live_modules() == 0);
  REQUIRE(f.cache->kernel("beta", "beta_one").loaded());
  CHECK(f.files.provided("beta") == 2);
  CHECK(f.fake.live_modules() == 1);
  f.cache.reset();
  CHECK(f.fake.live_modules() == 0);
  CHECK(f.fake.loads() == f.fake.unloads());
}

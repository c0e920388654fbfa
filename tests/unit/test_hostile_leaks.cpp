// A long-lived server creates and destroys kiln's objects many times. 1,000 rounds of a whole
// stack (DiskCache in a folder, a provider over it, a CudaBackend on the fake driver) with
// compiles, refused loads, evictions and clears must leave no module loaded, no context retained,
// no descriptor open and no entry past the bound. Heap leaks are LeakSanitizer's job: this program
// runs under it in the AddressSanitizer build (tools/test-hardening), which fails on any leak.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "cache/disk/cache_entry.hpp"
#include "cache_test_support.hpp"
#include "runtime/cuda_backend.hpp"
#include "hostile_support.hpp"
#include "jit/compiler.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

std::size_t open_descriptors() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& item : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

}  // namespace

TEST_CASE("1,000 rounds of create, compile, refuse, evict, clear and destroy leak nothing") {
  FakeDriver::instance().reset();
  const driver::DriverApi api = FakeDriver::instance().api();
  TempDir tmp;
  const std::string dir = tmp / "cache";
  std::size_t entry_bytes = 0;
  for (const auto& source : embedded_modules())
    entry_bytes = std::max(entry_bytes, encode_entry({}, fake_compiled(source, sm90a()), "13.0", 0).size());
  const std::uint64_t bound = 6 * entry_bytes;  // fewer than the 7 keys x 2 modules: eviction runs
  const std::size_t descriptors = open_descriptors();
  std::atomic<int> compiles{0};
  std::uint64_t evictions = 0;
  std::uint64_t rejected = 0;
  // Why: the refused fresh compiles warn, 333 times; the warning itself is tested elsewhere.
  const auto level = logger().level();
  logger().set_level(spdlog::level::err);

  for (int round = 0; round < 1000; ++round) {
    CAPTURE(round);
    auto disk = std::make_shared<DiskCache>(config_for(dir, bound));
    REQUIRE(disk->status().mode == DiskCacheMode::read_write);
    CudaBackend backend(api, 0, disk_provider(disk, round % 7, compiles), always(sm90a()));
    // Every third round the driver refuses the first image (of either module): evicted, and
    // compiled again if it came from disk, failed if it was fresh.
    if (round % 3 == 0) FakeDriver::instance().fail_next("cuModuleLoadDataEx", CUDA_ERROR_INVALID_IMAGE);
    const auto quant = ops::Fp8ActQuant::resolve(backend);
    REQUIRE(quant.available());
    REQUIRE(((quant.shared().loaded() && quant.twin_present()) || round % 3 == 0));
    if (round % 2 == 0) {
      backend.clear();  // forgets a failure too, so both load now
      REQUIRE(backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY).loaded());
      REQUIRE(backend.try_target_kernel(ops::FP8_QUANT_HOPPER_MODULE, ops::FP8_QUANT_HOPPER_ENTRY).loaded());
    }
    evictions += disk->counters().evictions;
    rejected += disk->counters().rejected;
  }
  logger().set_level(level);

  CHECK(FakeDriver::instance().live_modules() == 0);
  CHECK(FakeDriver::instance().loads() == FakeDriver::instance().unloads());
  CHECK(FakeDriver::instance().retained(0) == 0);
  CHECK(open_descriptors() == descriptors);
  CHECK(compiles > 14);     // every key at least once, more after evictions and refusals
  CHECK(evictions > 0);
  CHECK(rejected > 0);
  DiskCache after(config_for(dir, bound));
  CHECK(after.stats().bytes <= bound);
  CHECK(after.stats().temp_files == 0);
}

TEST_CASE("1,000 Services created and destroyed, with and without a disk cache, leak nothing") {
  // Why the fake driver: every Service really loads (fake) modules, retains a context and reads or
  // writes the disk cache on every machine; tests/gpu/test_gpu_leaks.cpp does the same with the
  // real driver and counts device memory.
  FakeDriver::instance().reset();
  const driver::DriverApi api = FakeDriver::instance().api();
  TempDir tmp;
  std::atomic<int> compiles{0};
  const std::size_t descriptors = open_descriptors();
  for (int round = 0; round < 1000; ++round) {
    auto disk = std::make_shared<DiskCache>(round % 2 ? config_for(tmp / "cache") : DiskCacheConfig{});
    InternalService service(std::make_unique<CudaBackend>(api, 0, disk_provider(disk, 0, compiles), always(sm90a())), disk);
    REQUIRE(service.available());
    REQUIRE(service.fp8_act_quant().available());
    REQUIRE(service.counters().memory.failures == 0);
  }
  CHECK(FakeDriver::instance().live_modules() == 0);
  CHECK(FakeDriver::instance().loads() == 2000);
  CHECK(FakeDriver::instance().unloads() == 2000);
  CHECK(FakeDriver::instance().retained(0) == 0);
  CHECK(open_descriptors() == descriptors);
  // Rounds without a disk cache compile each time; the others compile once and then hit the disk.
  CHECK(compiles == 500 * 2 + 2);
}

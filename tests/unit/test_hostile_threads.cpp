// A serving process hammers kiln from many threads: two devices sharing one DiskCache, threads
// asking for the same and different modules, launching, reading counters, while another thread
// keeps calling clear(). Run under ThreadSanitizer by tools/test-hardening, which fails on any race;
// in every build the results must stay consistent (each handle either valid or refused with a
// kiln::Error, every module unloaded at the end).
#include <catch2/catch.hpp>

#include <thread>

#include "cache_test_support.hpp"
#include "hostile_support.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("many threads on two devices, with clear() racing them, stay consistent and leave nothing loaded") {
  FakeDriver::instance().reset({{"NVIDIA H200", 9, 0, 132}, {"NVIDIA RTX A6000", 8, 6, 84}});
  const driver::DriverApi api = FakeDriver::instance().api();
  TempDir tmp;
  auto disk = std::make_shared<DiskCache>(config_for(tmp.path()));
  std::atomic<int> compiles{0};
  const auto sm86 = Target{{8, 6}, false, OutputKind::cubin};
  constexpr int workers = 8;
  constexpr int rounds = 300;
  std::atomic<int> handles{0};
  std::atomic<int> launched_hopper{0}, launched_ampere{0};
  std::atomic<int> refused_hopper{0}, refused_ampere{0};
  std::atomic<int> unexpected{0};
  {
    CudaBackend hopper(api, 0, disk_provider(disk, 0, compiles), always(sm90a()));
    CudaBackend ampere(api, 1, disk_provider(disk, 0, compiles), always(sm86));
    std::atomic<bool> done{false};
    std::thread clearer([&] {
      while (!done) {
        hopper.clear();
        // Why a pause, not a signal: it only paces clear() among the launches (no event to wait for).
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    std::vector<std::thread> threads;
    for (int t = 0; t < workers; ++t)
      threads.emplace_back([&, t] {
        CudaBackend& gpu = t % 2 ? ampere : hopper;
        for (int i = 0; i < rounds; ++i) {
          try {
            const auto quant = ops::Fp8ActQuant::resolve(gpu);
            // Ampere has no twin; Hopper has both unless a clear() landed in between.
            if (&gpu == &ampere && (quant.twin_present() || !quant.shared().loaded())) ++unexpected;
            if (quant.shared().loaded()) ++handles;
            gpu.launch(quant.shared().loaded() ? quant.shared() : quant.hopper(), {1, 1, 1}, {128, 1, 1}, 0,
                       nullptr, nullptr);
            ++(&gpu == &ampere ? launched_ampere : launched_hopper);
          } catch (const Error&) {
            // Hopper: a handle made stale by clear(), or 0 in a window after it. Ampere is never
            // cleared, so an Error there is a bug, counted apart so it cannot hide among these.
            ++(&gpu == &ampere ? refused_ampere : refused_hopper);
          } catch (...) {
            ++unexpected;
          }
          (void)gpu.counters();
          (void)disk->counters();
        }
      });
    for (auto& thread : threads) thread.join();
    done = true;
    clearer.join();
    CHECK(unexpected == 0);
    CHECK(handles > 0);
    CHECK(ampere.counters().failures == 0);
    CHECK(hopper.counters().failures == 0);
    // Ampere never cleared: its module was compiled or read once, however many threads asked.
    CHECK(ampere.counters().compiles + ampere.counters().disk_hits == 1);
    CHECK(refused_ampere == 0);
    // Every Ampere round launches (half the workers), and each round either launches or is refused.
    CHECK(launched_ampere == workers / 2 * rounds);
    CHECK(launched_hopper + refused_hopper == workers / 2 * rounds);
    CHECK(FakeDriver::instance().launches().size() == std::size_t(launched_hopper + launched_ampere));
  }
  CHECK(FakeDriver::instance().live_modules() == 0);
  CHECK(FakeDriver::instance().uses_after_unload() == 0);
  CHECK(FakeDriver::instance().retained(0) == 0);
  CHECK(FakeDriver::instance().retained(1) == 0);
  CHECK(compiles == 3);  // three (module, target) pairs; every later load is a disk hit
  CHECK(disk->stats().entries == 3);
}

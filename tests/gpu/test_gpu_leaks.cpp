// 1,000 Services on the real GPU, each loading both quantizer modules (from the disk cache after
// the first round) and launching once, then destroyed: every module loaded is unloaded and the
// device's free memory comes back. The CPU suite's twin of this test has no modules to leak.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <memory>

#include <unistd.h>

#include "cache/disk/disk_cache.hpp"
#include "runtime/module_provider.hpp"
#include "device_buffer.hpp"
#include "runtime/cuda_backend.hpp"
#include "jit/compiler.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"

using namespace kiln;

namespace {

// The real driver's table with module loads and unloads counted on the way through.
std::atomic<long> loads{0};
std::atomic<long> unloads{0};
decltype(driver::DriverApi::cuModuleLoadDataEx) real_load = nullptr;
decltype(driver::DriverApi::cuModuleUnload) real_unload = nullptr;

CUresult counting_load(CUmodule* module, const void* image, unsigned n, CUjit_option* options, void** values) {
  const CUresult result = real_load(module, image, n, options, values);
  if (result == CUDA_SUCCESS) ++loads;
  return result;
}

CUresult counting_unload(CUmodule module) {
  const CUresult result = real_unload(module);
  if (result == CUDA_SUCCESS) ++unloads;
  return result;
}

std::size_t free_device_memory(const driver::PrimaryContext& context) {
  std::size_t free = 0;
  std::size_t total = 0;
  const driver::ScopedCurrent current(context);
  driver::check(context.api(), context.api().cuMemGetInfo_v2(&free, &total), "cuMemGetInfo");
  return free;
}

}  // namespace

TEST_CASE("1,000 Services that load and launch real modules leak no module and no device memory") {
  driver::DriverApi api = driver::driver_api();
  driver::require_entries(api, {"cuMemGetInfo_v2"}, "the leak test");
  real_load = api.cuModuleLoadDataEx;
  real_unload = api.cuModuleUnload;
  api.cuModuleLoadDataEx = counting_load;
  api.cuModuleUnload = counting_unload;
  // Why a context of our own for the whole test: the primary context (and its memory pools) stays
  // alive between Services, so what the free memory measures is modules and launches only.
  const driver::PrimaryContext context(api, 0);
  const auto folder = std::filesystem::temp_directory_path() / ("kiln-gpu-leaks-" + std::to_string(::getpid()));
  DiskCacheConfig config;
  config.dir = folder.string();
  auto disk = std::make_shared<DiskCache>(config);
  REQUIRE(disk->status().mode == DiskCacheMode::read_write);
  test::DeviceBuffer x(context, 2 * 128), q(context, 128), scales(context, 4);
  x.fill(0x3f);

  auto one_round = [&] {
    InternalService service(std::make_unique<CudaBackend>(api, 0, make_module_provider(disk, Compiler()), default_target_choice),
                    disk);
    const ops::Fp8ActQuant quant = service.fp8_act_quant();
    REQUIRE(quant.shared().loaded());
    quant.launch(service.gpu(), x.get(), q.get(), static_cast<float*>(scales.get()), 1, 128, nullptr);
    test::synchronize(context);
  };
  one_round();  // compiles into the disk cache; every later round loads from it
  const long loads_before = loads;
  const long unloads_before = unloads;
  const std::size_t free_before = free_device_memory(context);
  for (int round = 0; round < 1000; ++round) one_round();
  const std::size_t free_after = free_device_memory(context);
  const long loaded = loads - loads_before;
  const long unloaded = unloads - unloads_before;
  INFO("modules loaded " << loaded << ", unloaded " << unloaded << "; free device memory before " << free_before
                         << " after " << free_after);
  CHECK(loaded >= 1000);  // the shared kernel at least, every round
  CHECK(unloaded == loaded);
  // Why a margin: the driver may keep a small pool; one leaked module per round would be far more.
  CHECK(free_after + (std::size_t{4} << 20) >= free_before);
  std::filesystem::remove_all(folder);
}

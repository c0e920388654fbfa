// A deployment without a compiler, in a process whose NVRTC is hidden (run by test_kiln_pack.py
// with KILN_NVRTC_LIBRARY pointing nowhere and the toolkit off LD_LIBRARY_PATH, from another
// working directory than the one the bundle was made in): both quantizer modules resolve from the
// bundle named by KILN_TEST_BUNDLE, through the real provider and target choice, up to the
// driver (the fake one, with a real driver's CUBIN arch check in front); NVRTC is never loaded.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "base/config.hpp"
#include "cache/bundle/bundle_file.hpp"
#include "cache/cache_path.hpp"
#include "cache/disk/disk_cache.hpp"
#include "runtime/module_provider.hpp"
#include "runtime/prefetch.hpp"
#include "runtime/cuda_backend.hpp"
#include "fake_driver.hpp"
#include "hostile_support.hpp"
#include "image_check.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

std::string bundle_path() {
  const char* path = std::getenv("KILN_TEST_BUNDLE");
  REQUIRE(path != nullptr);
  return path;
}

bool nvrtc_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libnvrtc") != std::string::npos) return true;
  return false;
}

/// `api` must outlive the backend, which keeps a reference to it.
std::unique_ptr<CudaBackend> backend_over(const driver::DriverApi& api, std::vector<std::shared_ptr<CacheLayer>> layers) {
  auto provider = make_module_provider(std::make_shared<DiskCache>(DiskCacheConfig{}), Compiler(false), std::move(layers));
  return std::make_unique<CudaBackend>(api, 0, std::move(provider), default_target_choice, false);
}

/// A fake sm_90 driver, behind a real driver's CUBIN arch check, whose image exports the entries
/// of every embedded module: one image for all the good CUBINs a layer holds.
driver::DriverApi sm90_driver_exporting_every_module() {
  std::vector<std::string> entries;
  for (const auto& source : embedded_modules()) entries.insert(entries.end(), source.entries.begin(), source.entries.end());
  FakeDriver::instance().reset();
  ImageCheck::device_arch = 90;
  ImageCheck::exported = fake_cubin("bundle", entries);
  return ImageCheck::api();
}

void check_both_quantizer_modules_load(CudaBackend& backend) {
  REQUIRE(backend.available());
  REQUIRE(backend.target().has_value());
  CHECK(backend.target()->name() == "sm_90a");
  const auto quant = ops::Fp8ActQuant::resolve(backend);
  CHECK(quant.shared().loaded());
  CHECK(quant.twin_present());
}

}  // namespace

TEST_CASE("NVRTC hidden: both quantizer modules resolve from a bundle up to the driver, NVRTC never loaded") {
  REQUIRE_FALSE(nvrtc_location().has_value());
  CHECK(nvrtc_build().empty());
  auto bundle = std::make_shared<bundle::BundleFile>(bundle_path(), nullptr);
  REQUIRE(bundle->usable());
  CHECK_FALSE(bundle->recorded_nvrtc_build().empty());

  // The fake image the good CUBINs become must export both modules' entries: one image for all.
  const driver::DriverApi api = sm90_driver_exporting_every_module();
  auto backend = backend_over(api, {bundle});
  check_both_quantizer_modules_load(*backend);
  CHECK(FakeDriver::instance().loads() == 2);  // two real sm_90 CUBINs passed the arch check
  CHECK(bundle->report().hits == 2);
  CHECK_FALSE(nvrtc_load_attempted());
  CHECK_FALSE(nvrtc_mapped());
}

TEST_CASE("NVRTC hidden: a module in no layer is unavailable with a reason naming it, the target and no NVRTC") {
  const KernelSource* source = find_module(ops::FP8_QUANT_MODULE);
  REQUIRE(source != nullptr);
  const auto provider = make_module_provider(std::make_shared<DiskCache>(DiskCacheConfig{}), Compiler(false), {});
  const Target sm90a{{9, 0}, true, OutputKind::cubin};
  try {
    provider.provide(*source, sm90a);
    FAIL("provided without a layer or NVRTC");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains(source->module) && Catch::Contains("sm_90a") && Catch::Contains("no NVRTC"));
    CHECK(e.context().call == "nvrtc_api");
  }
  CHECK_FALSE(nvrtc_load_attempted());
}

// Hidden ([.]): test_kiln_pack.py runs it in a process that can see NVRTC, with KILN_JIT on and the
// bundle in KILN_CACHE_PATH.
TEST_CASE("NVRTC present, KILN_JIT on: a bundle holding this device's binaries is used without loading NVRTC",
          "[.][jit_on]") {
  REQUIRE(nvrtc_location().has_value());
  const driver::DriverApi api = sm90_driver_exporting_every_module();
  auto backend = backend_over(api, process_cache_path().layers);
  check_both_quantizer_modules_load(*backend);
  CHECK_FALSE(nvrtc_load_attempted());
  CHECK_FALSE(nvrtc_mapped());
}

// Hidden ([.]): a meson test of its own runs it alone, in a process that can see NVRTC and has not
// loaded it yet. The disk cache and target choice come from a Config, not the environment.
TEST_CASE("NVRTC present: a disk cache holding this device's binaries from this NVRTC build picks the target without "
          "loading NVRTC",
          "[.][warm_disk]") {
  REQUIRE(nvrtc_location().has_value());
  char folder[] = "/tmp/kiln-warm-disk-XXXXXX";
  REQUIRE(::mkdtemp(folder) != nullptr);
  Config config;
  config.cache_dir = folder;
  const auto disk = std::make_shared<DiskCache>(cache_path_for(config).writable);
  REQUIRE(disk->status().mode == DiskCacheMode::read_write);
  FakeDriver::instance().reset();
  const driver::DriverApi api = FakeDriver::instance().api();
  const auto backend_now = [&] {
    return std::make_unique<CudaBackend>(api, 0, make_module_provider(disk, Compiler(false)),
                                         target_chooser(config, {}, disk), false);
  };
  // What a warm process finds: every module sm_90a carries, stored under the key this NVRTC build gives.
  const Target sm90a{{9, 0}, true, OutputKind::cubin};
  const std::vector<std::string> options = Compiler(false).options(sm90a);
  const auto modules = carried_modules(sm90a);
  REQUIRE(modules.size() >= 2);
  for (const KernelSource* source : modules) {
    const CacheKey key = module_cache_key(*source, sm90a, options);
    CHECK_FALSE(disk->holds(key, source->module, sm90a));
    disk->store(key, test::fake_compiled(*source, sm90a));
    CHECK(disk->holds(key, source->module, sm90a));
  }
  auto backend = backend_now();
  REQUIRE(backend->available());
  REQUIRE(backend->target().has_value());
  CHECK(backend->target()->name() == "sm_90a");
  CHECK_THAT(backend->target_reason(), Catch::StartsWith("the disk cache holds its binaries"));
  const auto quant = ops::Fp8ActQuant::resolve(*backend);
  CHECK(quant.shared().loaded());
  CHECK(quant.twin_present());
  CHECK(disk->counters().disk_hits == modules.size());
  CHECK_FALSE(nvrtc_load_attempted());
  CHECK_FALSE(nvrtc_mapped());

  // One module missing: the disk cache no longer answers for the target, NVRTC's arch list does.
  disk->evict(module_cache_key(*modules.back(), sm90a, options), modules.back()->module, sm90a);
  backend.reset();
  backend = backend_now();
  REQUIRE(backend->target().has_value());
  CHECK(backend->target()->name() == "sm_90a");
  CHECK_THAT(backend->target_reason(), !Catch::Contains("disk cache"));
  CHECK(nvrtc_load_attempted());
  CHECK(disk->clear() >= modules.size() - 1);
  CHECK(::rmdir(folder) == 0);
}


// Hostile cache entries that pass every check the disk cache makes (magic, version, key, sizes,
// checksum, names) but whose CUBIN cannot run: garbage bytes, or a real CUBIN for another arch
// planted under this arch's key. Only the driver can tell; kiln must then evict the entry and
// compile once more. The path is the real one: make_module_provider over a DiskCache and NVRTC,
// feeding a CudaBackend whose driver is the fake one with a real driver's image check in front.
#include <catch2/catch.hpp>

#include <cstring>

#include "runtime/module_provider.hpp"
#include "cache_test_support.hpp"
#include "runtime/cuda_backend.hpp"
#include "hostile_support.hpp"
#include "image_check.hpp"
#include "jit/compiler.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/service.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const KernelSource& quant_source() {
  const KernelSource* source = find_module(ops::FP8_QUANT_MODULE);
  REQUIRE(source != nullptr);
  return *source;
}

/// An entry kiln itself would accept: right key, module, target and options, any CUBIN.
void plant(DiskCache& disk, const Compiler& compiler, std::vector<std::uint8_t> cubin) {
  CompiledModule module;
  module.module = quant_source().module;
  module.target = sm90a();
  module.options = compiler.options(sm90a());
  module.ptx = "// planted";
  module.cubin = std::move(cubin);
  disk.store(module_cache_key(quant_source(), sm90a(), module.options), module);
  REQUIRE(disk.stats().entries == 1);
}

std::optional<CompiledModule> entry_on_disk(DiskCache& disk, const Compiler& compiler) {
  return disk.load(module_cache_key(quant_source(), sm90a(), compiler.options(sm90a())), quant_source().module,
                   sm90a());
}

}  // namespace

TEST_CASE("a cached CUBIN the driver refuses is evicted and compiled again, through the real provider") {
  FakeDriver::instance().reset();
  ImageCheck::device_arch = 90;
  ImageCheck::exported = fake_cubin("quant", quant_source().entries);
  const driver::DriverApi api = ImageCheck::api();
  TempDir tmp;
  auto disk = std::make_shared<DiskCache>(config_for(tmp.path()));
  const Compiler compiler(false);

  std::string planted_what;
  SECTION("garbage bytes") {
    std::vector<std::uint8_t> garbage(4096);
    for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
    plant(*disk, compiler, garbage);
    planted_what = "garbage";
  }
  SECTION("an ELF header with nothing behind it") {
    std::vector<std::uint8_t> header(64, 0);
    std::memcpy(header.data(), "\x7f" "ELF\x02\x01\x01\x41\x07", 9);
    plant(*disk, compiler, header);
    planted_what = "truncated ELF";
  }
  SECTION("a real sm_86 CUBIN under the sm_90a key") {
    const Target sm86{{8, 6}, false, OutputKind::cubin};
    const CompiledModule other = compile_module(quant_source(), sm86, compile_options(sm86, false));
    REQUIRE(cubin_arch(other.cubin.data()) == 86);
    plant(*disk, compiler, other.cubin);
    planted_what = "sm_86";
  }
  CAPTURE(planted_what);

  CudaBackend backend(api, 0, make_module_provider(disk, compiler), always(sm90a()));
  REQUIRE(backend.available());
  const KernelHandle handle = backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY);
  CHECK(handle.loaded());
  const auto memory = backend.counters();
  CHECK(memory.disk_hits == 1);
  CHECK(memory.load_refused == 1);
  CHECK(memory.compiles == 1);
  CHECK(memory.failures == 0);
  const auto counts = disk->counters();
  CHECK(counts.rejected == 1);
  CHECK(counts.compiles == 1);
  // The planted entry is gone; what is there now is NVRTC's CUBIN for this arch.
  const auto now = entry_on_disk(*disk, compiler);
  REQUIRE(now.has_value());
  CHECK(cubin_arch(now->cubin.data()) == 90);
  CHECK(FakeDriver::instance().loads() == 1);
  // The handle works: a second ask is a memory hit, no driver load, no compile.
  CHECK(backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY) == handle);
  CHECK(backend.counters().compiles == 1);
}

TEST_CASE("when the driver refuses the fresh CUBIN too, the kernel is 0 and nothing bad stays on disk") {
  FakeDriver::instance().reset();
  ImageCheck::device_arch = 80;  // a driver that takes no sm_90a image at all
  ImageCheck::exported = fake_cubin("quant", quant_source().entries);
  const driver::DriverApi api = ImageCheck::api();
  TempDir tmp;
  auto disk = std::make_shared<DiskCache>(config_for(tmp.path()));
  const Compiler compiler(false);
  plant(*disk, compiler, std::vector<std::uint8_t>(512, 0xCC));

  WarningCounter warnings;
  CudaBackend backend(api, 0, make_module_provider(disk, compiler), always(sm90a()));
  CHECK_FALSE(backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY).loaded());
  CHECK_FALSE(backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY).loaded());  // not retried
  CHECK(backend.counters().load_refused == 2);
  CHECK(backend.counters().compiles == 1);
  CHECK(backend.counters().failures == 1);
  CHECK(disk->counters().rejected == 2);
  CHECK(disk->stats().entries == 0);
  CHECK(warnings.count() == 1);
  CHECK_THAT(warnings.all(), Catch::Contains("CUDA_ERROR_NO_BINARY_FOR_GPU"));
  CHECK(FakeDriver::instance().live_modules() == 0);
}

// Every ErrorKind raised where kiln raises it, with the C status it maps to (c_status_of, what the
// kiln_ functions return) and the retry decision: the error's own, and the module loader's for the
// kinds a module load can meet (docs/embedding.md, "Errors").
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>

#include "c_api/c_boundary.hpp"
#include "runtime/module_provider.hpp"
#include "cache_test_support.hpp"
#include "runtime/cuda_backend.hpp"
#include "driver/driver_check.hpp"
#include "runtime/module_loader.hpp"
#include "driver/primary_context.hpp"
#include "fake_driver.hpp"
#include "hostile_support.hpp"
#include "jit/compiler.hpp"
#include "jit/dump.hpp"
#include "jit/nvrtc_api.hpp"
#include "jit/registry.hpp"
#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/target.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const KernelSource BROKEN{"error_kinds_broken", "common", {"broken_entry"},
                          "extern \"C\" __global__ void broken_entry() { this is not C++; }\n", "0"};
const KernelSource FAKE{"error_kinds_fake", "common", {"fake_entry"}, "// fake", "0"};

// The kiln::Error `raise` throws; fails the test when it throws none.
Error caught(const std::function<void()>& raise) {
  try {
    raise();
  } catch (const Error& error) {
    return error;
  }
  FAIL("no kiln::Error was thrown");
  throw std::logic_error("unreachable");
}

void check_error(const Error& error, ErrorKind kind, Retry retry, kiln_status status) {
  CAPTURE(error.what(), error_kind_name(error.kind()));
  CHECK(error.kind() == kind);
  CHECK(error.retry() == retry);
  CHECK(error.permanent() == (retry == Retry::permanent));
  CHECK(c_status_of(error) == status);
}

// One load of `source` through a real ModuleLoader over the fake driver, with `provide` as its
// provider: the loader's own retry decision for what `provide` throws.
struct Loader {
  FakeDriver& fake = FakeDriver::instance();
  driver::DriverApi api;
  std::unique_ptr<driver::PrimaryContext> context;

  Loader() {
    fake.reset();
    api = fake.api();
    context = std::make_unique<driver::PrimaryContext>(api, 0);
  }
  driver::LoadResult load(const KernelSource& source, ModuleProvider provider) {
    driver::ModuleLoader loader(*context, sm90a(), std::move(provider));
    return loader.load(source);
  }
  driver::LoadResult load(const KernelSource& source,
                          std::function<ProvidedModule(const KernelSource&, const Target&)> provide) {
    ModuleProvider provider;
    provider.provide = std::move(provide);
    return load(source, std::move(provider));
  }
};

ProvidedModule fake_binary(const KernelSource& source, const Target& target) {
  return ProvidedModule{fake_compiled(source, target), false};
}

}  // namespace

TEST_CASE("kinds and retries: invalid_argument is permanent, KILN_ERROR_INVALID_ARGUMENT") {
  FakeProvider files;
  const Error ordinal = caught([&] { CudaBackend backend(FakeDriver::missing(), -1, files.provider(), always(sm90a())); });
  check_error(ordinal, ErrorKind::invalid_argument, Retry::permanent, KILN_ERROR_INVALID_ARGUMENT);

  ops::QuantArgs args;
  args.k = 100;
  const Error shape = caught([&] { ops::GroupQuant::check(ops::QuantVariant{}, args); });
  check_error(shape, ErrorKind::invalid_argument, Retry::permanent, KILN_ERROR_INVALID_ARGUMENT);

  ops::QuantVariant impossible;
  impossible.output = ops::QuantOutput::int8;
  impossible.ue8m0 = true;  // ue8m0 scales exist only for e4m3
  REQUIRE_FALSE(impossible.refusal().empty());
  check_error(caught([&] { ops::quant_scales_bytes(impossible, 1, 128); }), ErrorKind::invalid_argument,
              Retry::permanent, KILN_ERROR_INVALID_ARGUMENT);

  // The same mapping at the C boundary itself.
  CHECK(kiln_version(nullptr, nullptr, nullptr) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(kiln_last_error(), Catch::Contains("invalid argument 'major'"));
}

TEST_CASE("kinds and retries: unavailable is KILN_ERROR_UNAVAILABLE; KILN_JIT=off and no NVRTC are permanent") {
  SECTION("KILN_JIT=off and a module in no cache layer, through the real provider and loader") {
    TempDir tmp;
    ::setenv("KILN_JIT", "off", 1);
    auto disk = std::make_shared<DiskCache>(config_for(tmp / "rw"));
    const ModuleProvider provider = make_module_provider(disk, Compiler(false), {}, nullptr);
    const Error error = caught([&] { provider.provide(FAKE, sm90a()); });
    check_error(error, ErrorKind::unavailable, Retry::permanent, KILN_ERROR_UNAVAILABLE);
    CHECK_THAT(error.what(), Catch::Contains("KILN_JIT=off"));
    Loader loader;
    const driver::LoadResult loaded = loader.load(FAKE, provider);
    CHECK_FALSE(loaded.module);
    CHECK(loaded.permanent);
    CHECK_THAT(loaded.reason, Catch::Contains("KILN_JIT=off"));
    ::unsetenv("KILN_JIT");
  }
  SECTION("a launch on a device without a driver") {
    FakeProvider files;
    CudaBackend backend(FakeDriver::missing(), 0, files.provider(), always(sm90a()));
    REQUIRE_FALSE(backend.available());
    check_error(caught([&] { backend.launch(KernelHandle{1}, {1, 1, 1}, {1, 1, 1}, 0, nullptr, nullptr); }),
                ErrorKind::unavailable, Retry::permanent, KILN_ERROR_UNAVAILABLE);
  }
  SECTION("a driver without an entry a caller needs") {
    FakeDriver::instance().reset();
    const driver::DriverApi api = FakeDriver::instance().api();  // without the memory entries
    check_error(caught([&] { driver::require_entries(api, {"cuMemAlloc_v2"}, "error kinds"); }),
                ErrorKind::unavailable, Retry::permanent, KILN_ERROR_UNAVAILABLE);
  }
  SECTION("the seed quantizer with no kernel: transient, the next call asks again") {
    FakeProvider files;
    CudaBackend backend(FakeDriver::missing(), 0, files.provider(), always(sm90a()));
    const ops::Fp8ActQuant quant(KernelHandle{}, KernelHandle{}, 132);
    const Error error = caught([&] {
      quant.launch(backend, reinterpret_cast<const void*>(256), reinterpret_cast<void*>(256),
                   reinterpret_cast<float*>(256), 1, 128, nullptr);
    });
    check_error(error, ErrorKind::unavailable, Retry::transient, KILN_ERROR_UNAVAILABLE);
  }
}

TEST_CASE("kinds and retries: driver is KILN_ERROR_DRIVER; a missing entry is permanent, out of memory is not") {
  SECTION("cuLaunchKernel out of memory: transient, the CUresult in the context") {
    FakeDriver::instance().reset();
    const driver::DriverApi api = FakeDriver::instance().api();
    FakeProvider files;
    CudaBackend backend(api, 0, files.provider(), always(sm90a()));
    const KernelHandle kernel = backend.try_kernel(ops::FP8_QUANT_MODULE, ops::FP8_QUANT_ENTRY);
    REQUIRE(kernel.loaded());
    FakeDriver::instance().fail_next("cuLaunchKernel", CUDA_ERROR_OUT_OF_MEMORY);
    const Error error = caught([&] { backend.launch(kernel, {1, 1, 1}, {128, 1, 1}, 0, nullptr, nullptr); });
    check_error(error, ErrorKind::driver, Retry::transient, KILN_ERROR_DRIVER);
    CHECK(error.context().result == CUDA_ERROR_OUT_OF_MEMORY);
  }
  SECTION("check() on any failed call: transient") {
    const driver::DriverApi api = FakeDriver::instance().api();
    check_error(caught([&] { driver::check(api, CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData"); }), ErrorKind::driver,
                Retry::transient, KILN_ERROR_DRIVER);
  }
  SECTION("the loader: an image without the entry is permanent") {
    Loader loader;
    const driver::LoadResult loaded = loader.load(FAKE, [](const KernelSource& source, const Target& target) {
      ProvidedModule provided = fake_binary(source, target);
      provided.module.cubin = fake_cubin(source.module, {"another_entry"});
      return provided;
    });
    CHECK_FALSE(loaded.module);
    CHECK(loaded.permanent);
    CHECK_THAT(loaded.reason, Catch::Contains("cuModuleGetFunction") && Catch::Contains("fake_entry"));
  }
  SECTION("the loader: a context switch out of memory is transient") {
    Loader loader;
    loader.fake.fail_next("cuCtxGetCurrent", CUDA_ERROR_OUT_OF_MEMORY);
    const driver::LoadResult loaded = loader.load(FAKE, fake_binary);
    CHECK_FALSE(loaded.module);
    CHECK_FALSE(loaded.permanent);
    CHECK_THAT(loaded.reason, Catch::Contains("cuCtxGetCurrent"));
  }
  SECTION("the loader: a load refused for memory is transient, a fresh binary refused as a bad image permanent") {
    Loader loader;
    loader.fake.fail_next("cuModuleLoadDataEx", CUDA_ERROR_OUT_OF_MEMORY);
    const driver::LoadResult out_of_memory = loader.load(FAKE, fake_binary);
    CHECK_FALSE(out_of_memory.module);
    CHECK_FALSE(out_of_memory.permanent);
    loader.fake.fail_next("cuModuleLoadDataEx", CUDA_ERROR_INVALID_IMAGE);
    const driver::LoadResult bad_image = loader.load(FAKE, fake_binary);
    CHECK_FALSE(bad_image.module);
    CHECK(bad_image.permanent);
    CHECK(loader.load(FAKE, fake_binary).module);  // the driver itself still works
  }
}

TEST_CASE("kinds and retries: compile is KILN_ERROR_COMPILE; a source error is permanent, NVRTC out of memory not") {
  const Target target = sm90a();
  const Error error = caught([&] { compile_module(BROKEN, target, compile_options(target, false)); });
  check_error(error, ErrorKind::compile, Retry::permanent, KILN_ERROR_COMPILE);
  CHECK(error.context().result == NVRTC_ERROR_COMPILATION);
  CHECK_FALSE(error.context().log.empty());

  Loader loader;
  const driver::LoadResult compiled = loader.load(BROKEN, [](const KernelSource& source, const Target& target) {
    return ProvidedModule{compile_module(source, target, compile_options(target, false)), false};
  });
  CHECK_FALSE(compiled.module);
  CHECK(compiled.permanent);
  CHECK_THAT(compiled.reason, Catch::Contains("NVRTC log"));

  CHECK(compile_retry(NVRTC_ERROR_COMPILATION) == Retry::permanent);
  CHECK(compile_retry(NVRTC_ERROR_INVALID_OPTION) == Retry::permanent);
  CHECK(compile_retry(NVRTC_SUCCESS) == Retry::permanent);  // no PTX after a compile that passed
  CHECK(compile_retry(NVRTC_ERROR_OUT_OF_MEMORY) == Retry::transient);
  CHECK(compile_retry(NVRTC_ERROR_INTERNAL_ERROR) == Retry::transient);

  FakeProvider files;
  files.fail(FAKE.module, NVRTC_ERROR_OUT_OF_MEMORY);
  const driver::LoadResult out_of_memory = loader.load(FAKE, files.provider());
  CHECK_FALSE(out_of_memory.module);
  CHECK_FALSE(out_of_memory.permanent);
}

TEST_CASE("kinds and retries: io, remote and internal are KILN_ERROR_INTERNAL and transient") {
  SECTION("io: a dump that cannot write") {
    TempDir tmp;
    std::filesystem::create_directories(tmp.path());
    std::ofstream(tmp / "a_file") << "not a folder";
    CompiledModule module = fake_compiled(FAKE, sm90a());
    const Error error = caught([&] { dump_module(module, FAKE, tmp / "a_file/sub"); });
    check_error(error, ErrorKind::io, Retry::transient, KILN_ERROR_INTERNAL);
    Loader loader;
    const driver::LoadResult loaded = loader.load(FAKE, [&](const KernelSource& source, const Target&) -> ProvidedModule {
      dump_module(module, source, tmp / "a_file/sub");
      return {};
    });
    CHECK_FALSE(loaded.permanent);
  }
  SECTION("remote: the Redis tier's kind, raised as its code raises it") {
    check_error(caught([] { throw_error(ErrorKind::remote, Retry::transient, "remote cache: connection reset"); }),
                ErrorKind::remote, Retry::transient, KILN_ERROR_INTERNAL);
  }
  SECTION("internal: a module compiled for a target that does not carry its family, a bad KILN_ARCH, the default") {
    const Target sm80 = parse_target("sm_80");
    const KernelSource& twin = *find_module(ops::FP8_QUANT_HOPPER_MODULE);
    check_error(caught([&] { compile_module(twin, sm80, compile_options(sm80, false)); }), ErrorKind::internal,
                Retry::transient, KILN_ERROR_INTERNAL);
    check_error(caught([] { parse_target("sm_1"); }), ErrorKind::internal, Retry::transient, KILN_ERROR_INTERNAL);
    check_error(caught([] { throw_error("plain"); }), ErrorKind::internal, Retry::transient, KILN_ERROR_INTERNAL);
    Loader loader;
    const driver::LoadResult loaded = loader.load(twin, [](const KernelSource& source, const Target&) {
      const Target sm80 = parse_target("sm_80");
      return ProvidedModule{compile_module(source, sm80, compile_options(sm80, false)), false};
    });
    CHECK_FALSE(loaded.permanent);
  }
  SECTION("not a kiln::Error at all: transient") {
    Loader loader;
    const driver::LoadResult loaded = loader.load(FAKE, [](const KernelSource&, const Target&) -> ProvidedModule {
      throw std::runtime_error("a provider's own failure");
    });
    CHECK_FALSE(loaded.permanent);
  }
}

TEST_CASE("every kind has a name") {
  for (const ErrorKind kind : {ErrorKind::internal, ErrorKind::invalid_argument, ErrorKind::unavailable,
                               ErrorKind::driver, ErrorKind::compile, ErrorKind::io, ErrorKind::remote})
    CHECK(std::string(error_kind_name(kind)) != "unknown");
}

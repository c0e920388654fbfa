// The driver loader: which entries it requires and which it resolves optionally, what its states
// mean (no driver, unusable, ok) and what it says, over the fake driver's functions served
// through resolve_driver_api's symbol lookup, and over real dlopen failures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

#include "driver/devices.hpp"
#include "driver/driver_api.hpp"
#include "driver/driver_check.hpp"
#include "fake_driver.hpp"
#include "kiln/error.hpp"

using namespace kiln;
using namespace kiln::test;
using Catch::Matchers::Contains;

namespace {

// Stands in for the optional entries, which the loader only resolves; never called.
void never_called() {}

// Every entry the loader asks for, as a driver would export it: the fake's functions for the
// required ones, a placeholder for the optional ones. Tests erase what a driver lacks.
std::map<std::string, void*> full_driver() {
  const driver::DriverApi fake = FakeDriver::instance().api();
  std::map<std::string, void*> symbols;
#define KILN_TEST_SYMBOL(symbol) symbols[#symbol] = reinterpret_cast<void*>(fake.symbol);
  KILN_DRIVER_ENTRY_POINTS(KILN_TEST_SYMBOL)
#undef KILN_TEST_SYMBOL
  for (const char* name : driver::optional_entry_points())
    symbols[name] = reinterpret_cast<void*>(&never_called);
  return symbols;
}

driver::DriverApi load_from(const std::map<std::string, void*>& symbols) {
  return driver::resolve_driver_api(
      [&symbols](const char* name) -> void* {
        const auto found = symbols.find(name);
        return found == symbols.end() ? nullptr : found->second;
      },
      "libcuda-test.so.1");
}

bool listed(const std::vector<const char*>& names, const std::string& name) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

std::size_t occurrences(const std::string& text, const std::string& word) {
  std::size_t count = 0;
  for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + word.size())) ++count;
  return count;
}

}  // namespace

TEST_CASE("driver loader: the library's entries are required, the tests' and benchmark's are optional") {
  const auto& required = driver::required_entry_points();
  const auto& optional = driver::optional_entry_points();
  // What the module path, contexts and launches call: a driver without one of them is unusable.
  for (const char* name : {"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDevicePrimaryCtxRetain",
                           "cuCtxPushCurrent_v2", "cuModuleLoadDataEx", "cuModuleGetFunction", "cuLaunchKernel"}) {
    CAPTURE(name);
    CHECK(listed(required, name));
  }
  // Only the benchmark and tests use these; cuEventElapsedTime_v2 exists from CUDA 12.8 only.
  for (const char* name : {"cuEventElapsedTime_v2", "cuMemAlloc_v2", "cuGraphLaunch", "cuStreamCreate"}) {
    CAPTURE(name);
    CHECK(listed(optional, name));
    CHECK_FALSE(listed(required, name));
  }
  for (const char* name : required) CHECK_FALSE(listed(optional, name));
}

TEST_CASE("driver loader: a driver without cuEventElapsedTime_v2 (before CUDA 12.8) is usable") {
  FakeDriver::instance().reset();
  auto symbols = full_driver();
  symbols.erase("cuEventElapsedTime_v2");
  const driver::DriverApi api = load_from(symbols);
  CHECK(api.loaded);
  CHECK(api.state() == driver::DriverState::ok);
  CHECK(api.load_error.empty());
  REQUIRE(api.version);
  CHECK(api.version->str() == "13.0");
  CHECK(api.cuEventElapsedTime_v2 == nullptr);
  CHECK(api.cuEventRecord != nullptr);
  CHECK(api.cuModuleLoadDataEx != nullptr);
  CHECK_FALSE(driver::has_entry(api, "cuEventElapsedTime_v2"));
  CHECK(driver::has_entry(api, "cuEventRecord"));
  CHECK_FALSE(driver::has_entry(api, "cuNoSuchEntry"));

  // The library's own path works on it: devices are listed.
  const driver::GpuScan scan = driver::scan_gpus(api);
  CHECK(scan.state == driver::DriverState::ok);
  CHECK(scan.devices.size() == 1);

  // A user of the missing entry is told plainly, before it calls a null pointer.
  CHECK_NOTHROW(driver::require_entries(api, {"cuEventRecord", "cuMemAlloc_v2"}, "the GPU suite"));
  try {
    driver::require_entries(api, {"cuEventCreate", "cuEventElapsedTime_v2"}, "kiln-bench");
    FAIL("a missing optional entry was not reported");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) ==
          "the NVIDIA driver (13.0) is too old for kiln-bench: libcuda-test.so.1 lacks cuEventElapsedTime_v2");
  }
  CHECK_THROWS_WITH(driver::require_entries(api, driver::optional_entry_points(), "kiln-bench"),
                    Contains("lacks cuEventElapsedTime_v2"));
  // A test table (the fake's) has none of the tests' entries: every one is named.
  CHECK_THROWS_WITH(driver::require_entries(FakeDriver::instance().api(), {"cuMemAlloc_v2", "cuMemFree_v2"}, "x"),
                    Contains("lacks cuMemAlloc_v2, cuMemFree_v2"));
}

TEST_CASE("driver loader: a driver lacking a required entry is unusable, not absent") {
  FakeDriver::instance().reset();
  for (const char* name : driver::required_entry_points()) {
    CAPTURE(name);
    auto symbols = full_driver();
    symbols.erase(name);
    const driver::DriverApi api = load_from(symbols);
    CHECK_FALSE(api.loaded);
    CHECK(api.state() == driver::DriverState::unusable);
    CHECK(api.load_error == std::string("libcuda-test.so.1 lacks ") + name +
                                ": the NVIDIA driver is too old; GPU paths are unavailable");
    CHECK(driver::scan_gpus(api).state == driver::DriverState::unusable);
  }
}

TEST_CASE("driver loader: cuInit failing makes the driver unusable, with the driver's words") {
  FakeDriver::instance().reset();
  FakeDriver::instance().fail_next("cuInit", CUDA_ERROR_NO_DEVICE);
  const driver::DriverApi api = load_from(full_driver());
  CHECK_FALSE(api.loaded);
  CHECK(api.state() == driver::DriverState::unusable);
  CHECK(api.load_error == "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected); "
                          "GPU paths are unavailable");
  const driver::GpuScan scan = driver::scan_gpus(api);
  CHECK(scan.state == driver::DriverState::unusable);
  CHECK(scan.reason == api.load_error);
}

TEST_CASE("driver loader: no library at all is no_driver, and the message names it once") {
  const driver::DriverApi api = FakeDriver::missing();
  CHECK_FALSE(api.loaded);
  CHECK(api.state() == driver::DriverState::no_driver);
  CHECK(api.load_error == "libcuda-kiln-test-missing.so.1 not found: cannot open shared object file: No such file "
                          "or directory; no NVIDIA driver; GPU paths are unavailable");
  CHECK(occurrences(api.load_error, "libcuda-kiln-test-missing.so.1") == 1);
  const driver::GpuScan scan = driver::scan_gpus(api);
  CHECK(scan.state == driver::DriverState::no_driver);
  CHECK(scan.reason == api.load_error);
  CHECK(scan.devices.empty());
}

TEST_CASE("driver loader: a library that is there but does not load is unusable, not 'no driver'") {
  char dir_template[] = "/tmp/kiln-driver-test-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string path = std::string(dir_template) + "/libcuda.so.1";
  {
    std::ofstream out(path, std::ios::binary);
    out << "not an ELF file\n";
  }
  const driver::DriverApi api = driver::load_driver_api(path.c_str());
  std::filesystem::remove_all(dir_template);
  CHECK_FALSE(api.loaded);
  CHECK(api.state() == driver::DriverState::unusable);
  CHECK_THAT(api.load_error, Contains(path + " cannot be loaded: ") && Contains("GPU paths are unavailable"));
  CHECK(occurrences(api.load_error, path) == 1);
}

TEST_CASE("scan_gpus: a working driver's devices; a driver that errors or lists none is unusable") {
  FakeDriver& fake = FakeDriver::instance();
  SECTION("devices") {
    fake.reset({{"NVIDIA H200", 9, 0, 132}, {"NVIDIA RTX A6000", 8, 6, 84}});
    const driver::GpuScan scan = driver::scan_gpus(fake.api());
    CHECK(scan.state == driver::DriverState::ok);
    CHECK(scan.reason.empty());
    REQUIRE(scan.devices.size() == 2);
    CHECK(scan.devices[1].name == "NVIDIA RTX A6000");
  }
  SECTION("no device") {
    fake.reset({});
    const driver::GpuScan scan = driver::scan_gpus(fake.api());
    CHECK(scan.state == driver::DriverState::unusable);
    CHECK(scan.reason == "the NVIDIA driver is loaded but reports no CUDA device");
  }
  SECTION("a driver call fails") {
    fake.reset();
    fake.fail_next("cuDeviceGetAttribute", CUDA_ERROR_INVALID_VALUE);
    const driver::GpuScan scan = driver::scan_gpus(fake.api());
    CHECK(scan.state == driver::DriverState::unusable);
    CHECK_THAT(scan.reason, Contains("cuDeviceGetAttribute failed: CUDA_ERROR_INVALID_VALUE"));
    CHECK(scan.devices.empty());
  }
  SECTION("the default table") {
    CHECK(driver::DriverApi{}.state() == driver::DriverState::no_driver);
  }
}

TEST_CASE("driver states have names") {
  CHECK(driver::to_string(driver::DriverState::ok) == "ok");
  CHECK(driver::to_string(driver::DriverState::no_driver) == "no driver");
  CHECK(driver::to_string(driver::DriverState::unusable) == "driver unusable");
}

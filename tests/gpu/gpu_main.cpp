// Main of the GPU suite. Exits 77 (Meson's "skipped") only when there is no NVIDIA driver at all
// (libcuda.so.1 does not exist). A driver that is there but unusable (it fails to load, lacks an
// entry kiln requires, fails cuInit, errors while listing devices or lists none), or that lacks an
// optional entry the suite calls, fails the run: on a GPU machine that is a broken set-up, and a
// skip would hide it.
#define CATCH_CONFIG_RUNNER
#include "../catch2_run.hpp"

#include <cstdio>
#include <exception>

#include "driver/devices.hpp"
#include "driver/driver_check.hpp"

int main(int argc, char** argv) {
  const kiln::driver::DriverApi& api = kiln::driver::driver_api();
  const kiln::driver::GpuScan scan = kiln::driver::scan_gpus(api);
  switch (scan.state) {
    case kiln::driver::DriverState::no_driver:
      std::printf("SKIP: no NVIDIA driver: %s\n", scan.reason.c_str());
      return 77;
    case kiln::driver::DriverState::unusable:
      std::fprintf(stderr, "FAIL: the NVIDIA driver is there but unusable: %s\n", scan.reason.c_str());
      return 1;
    case kiln::driver::DriverState::ok:
      break;
  }
  try {
    // Why these: what tests/gpu/device_buffer.hpp calls, optional in the driver table.
    kiln::driver::require_entries(api,
                                  {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2",
                                   "cuMemsetD8_v2", "cuCtxSynchronize"},
                                  "the GPU suite");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "FAIL: %s\n", error.what());
    return 1;
  }
  return kiln::test::run_catch2(argc, argv);
}

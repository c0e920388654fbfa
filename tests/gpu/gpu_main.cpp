// Main of the GPU suite: exits 77 (Meson's "skipped") with the reason when there is no usable GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "driver/cuda_backend.hpp"

int main(int argc, char** argv) {
  const kiln::DriverStatus status = kiln::driver_status();
  if (!status.available || status.devices.empty()) {
    std::printf("SKIP: no usable GPU: %s\n", status.available ? "the driver reports no devices" : status.reason.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

// Linked with tests/gpu/gpu_main.cpp, whose main decides to skip (77), fail, or run this; run by
// tests/tooling/test_gpu_skip_policy.py under fake drivers. It runs only on a driver kiln can use.
#include <catch2/catch.hpp>

#include "driver/driver_api.hpp"

TEST_CASE("gpu_main lets the suite run only on a usable driver") {
  CHECK(kiln::driver::driver_api().state() == kiln::driver::DriverState::ok);
}

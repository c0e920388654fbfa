// Checks for tests/catch2_run.hpp, run by Meson with should_fail: a hidden case that fails exactly
// 77 assertions (Catch2's own exit status would be 77, Meson's "skipped"), and a filter that
// matches no test (Catch2's own exit status would be 0).
#include <catch2/catch.hpp>

TEST_CASE("fails exactly 77 assertions", "[.seventy_seven]") {
  for (int failure = 0; failure < 77; ++failure) CHECK(failure < 0);
}

#include <catch2/catch.hpp>

#include <cstdlib>

#include "base/env.hpp"
#include "cache_test_support.hpp"

using namespace kiln;

TEST_CASE("parse_switch accepts the switch words in any case and nothing else") {
  for (auto on : {"1", "true", "TRUE", "On", "yes"}) CHECK(parse_switch(on) == std::optional<bool>(true));
  for (auto off : {"0", "false", "OFF", "no", "No"}) CHECK(parse_switch(off) == std::optional<bool>(false));
  for (auto bad : {"", " 1", "1 ", "2", "enable", "truee", "-1", "o"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_switch(bad).has_value());
  }
}

TEST_CASE("parse_size reads decimal bytes with binary suffixes and rejects the rest") {
  CHECK(parse_size("0") == std::optional<std::uint64_t>(0));
  CHECK(parse_size("1024") == std::optional<std::uint64_t>(1024));
  CHECK(parse_size("1K") == std::optional<std::uint64_t>(1024));
  CHECK(parse_size("3m") == std::optional<std::uint64_t>(3ull << 20));
  CHECK(parse_size("1G") == std::optional<std::uint64_t>(1ull << 30));
  CHECK(parse_size("2T") == std::optional<std::uint64_t>(2ull << 40));
  CHECK(parse_size("18446744073709551615") == std::optional<std::uint64_t>(18446744073709551615ull));
  for (auto bad : {"", "K", "-1", "+1", " 1", "1 ", "1.5G", "18446744073709551616", "16777216T", "1KB", "0x10"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_size(bad).has_value());
  }
}

TEST_CASE("split_path_list keeps the non-empty elements in order") {
  CHECK(split_path_list("").empty());
  CHECK(split_path_list(":::").empty());
  CHECK(split_path_list("/a") == std::vector<std::string>{"/a"});
  CHECK(split_path_list(":/a::b/c:") == std::vector<std::string>{"/a", "b/c"});
}

TEST_CASE("switch_lever gives the fallback when unset or bad") {
  ::unsetenv("KILN_TEST_LEVER");
  CHECK(switch_lever("KILN_TEST_LEVER", true));
  CHECK_FALSE(switch_lever("KILN_TEST_LEVER", false));
  ::setenv("KILN_TEST_LEVER", "0", 1);
  CHECK_FALSE(switch_lever("KILN_TEST_LEVER", true));
  ::setenv("KILN_TEST_LEVER", "bogus", 1);
  CHECK(switch_lever("KILN_TEST_LEVER", true));
  CHECK_FALSE(switch_lever("KILN_TEST_LEVER", false));
  ::setenv("KILN_TEST_LEVER", "", 1);
  CHECK(switch_lever("KILN_TEST_LEVER", true));
  ::unsetenv("KILN_TEST_LEVER");
}

TEST_CASE("switch_lever warns once for a bad value however often it is read") {
  // KILN_JIT is read on every use: `kiln info` printed its warning twice.
  test::WarningCounter warnings;
  ::setenv("KILN_TEST_WARNED_LEVER", "maybe", 1);
  CHECK(switch_lever("KILN_TEST_WARNED_LEVER", true));
  CHECK(switch_lever("KILN_TEST_WARNED_LEVER", true));
  CHECK(warnings.count() == 1);
  ::setenv("KILN_TEST_WARNED_LEVER", "perhaps", 1);  // another mistake, its own warning
  CHECK_FALSE(switch_lever("KILN_TEST_WARNED_LEVER", false));
  CHECK(warnings.count() == 2);
  CHECK_THAT(warnings.all(), Catch::Contains("KILN_TEST_WARNED_LEVER='maybe'") &&
                                 Catch::Contains("KILN_TEST_WARNED_LEVER='perhaps'"));
  ::unsetenv("KILN_TEST_WARNED_LEVER");
}

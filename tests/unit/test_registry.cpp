#include <catch2/catch.hpp>

#include <set>

#include "jit/registry.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

using namespace kiln;

TEST_CASE("registry holds both quantizer modules with their families and entry points") {
  const auto* shared = find_module(ops::FP8_QUANT_MODULE);
  REQUIRE(shared != nullptr);
  CHECK(shared->family == "common");
  CHECK(shared->entries ==
        std::vector<std::string>{std::string(ops::FP8_QUANT_ENTRY), std::string(ops::FP8_QUANT_PDL_ENTRY)});

  const auto* twin = find_module(ops::FP8_QUANT_HOPPER_MODULE);
  REQUIRE(twin != nullptr);
  CHECK(twin->family == "hopper");
  CHECK(twin->entries == std::vector<std::string>{std::string(ops::FP8_QUANT_HOPPER_ENTRY)});

  CHECK(find_module("no_such_module") == nullptr);
}

TEST_CASE("registry entries are complete and unique") {
  std::set<std::string> names;
  for (const auto& source : embedded_modules()) {
    CAPTURE(source.module);
    CHECK(names.insert(source.module).second);
    CHECK_FALSE(source.text.empty());
    CHECK(source.sha256.size() == 64);
    CHECK_FALSE(source.entries.empty());
    for (const auto& entry : source.entries) CHECK(source.text.find(entry) != std::string_view::npos);
  }
  bool has_e4m3_header = false;
  for (const auto& header : embedded_headers()) has_e4m3_header |= header.name == "fp8_e4m3.cuh";
  CHECK(has_e4m3_header);
}

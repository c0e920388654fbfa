#include <catch2/catch.hpp>

#include <functional>
#include <set>

#include "cache/cache_key.hpp"

using namespace kiln;

namespace {

CacheKeyInputs fixed_inputs() {
  CacheKeyInputs in;
  in.format_version = 1;
  in.nvrtc = {13, 0};
  in.target = "sm_90a";
  in.kind = OutputKind::cubin;
  in.options = {"--std=c++17", "-arch=sm_90a", "-default-device"};
  in.module = "per_token_group_quant_fp8";
  in.source = "extern \"C\" __global__ void k() {}\n";
  in.headers = {{"a.cuh", "#pragma once\n"}, {"b.cuh", "#define B 1\n"}};
  return in;
}

}  // namespace

TEST_CASE("cache key of fixed inputs is pinned (an encoding change must bump cache_format_version)") {
  CHECK(cache_format_version == 1);
  CHECK(make_cache_key(fixed_inputs()).hex() == "47bdc5020a18887c777464239b6492c7");
}

TEST_CASE("cache key is the same for the same inputs and differs when any input changes") {
  const CacheKey base = make_cache_key(fixed_inputs());
  CHECK(make_cache_key(fixed_inputs()) == base);

  const std::vector<std::pair<const char*, std::function<void(CacheKeyInputs&)>>> changes = {
      {"format version", [](CacheKeyInputs& in) { in.format_version = 2; }},
      {"nvrtc major", [](CacheKeyInputs& in) { in.nvrtc.major = 12; }},
      {"nvrtc minor", [](CacheKeyInputs& in) { in.nvrtc.minor = 1; }},
      {"target", [](CacheKeyInputs& in) { in.target = "sm_90"; }},
      {"output kind", [](CacheKeyInputs& in) { in.kind = OutputKind::ptx; }},
      {"option removed", [](CacheKeyInputs& in) { in.options.pop_back(); }},
      {"option added", [](CacheKeyInputs& in) { in.options.push_back("-lineinfo"); }},
      {"option order", [](CacheKeyInputs& in) { std::swap(in.options[0], in.options[1]); }},
      {"option text", [](CacheKeyInputs& in) { in.options[0] = "--std=c++20"; }},
      {"module", [](CacheKeyInputs& in) { in.module = "fp8_act_quant_hopper"; }},
      {"source byte", [](CacheKeyInputs& in) { in.source = "extern \"C\" __global__ void k() {}\n\n"; }},
      {"header bytes", [](CacheKeyInputs& in) { in.headers[1].text = "#define B 2\n"; }},
      {"header name", [](CacheKeyInputs& in) { in.headers[1].name = "c.cuh"; }},
      {"header added", [](CacheKeyInputs& in) { in.headers.push_back({"d.cuh", ""}); }},
      {"header removed", [](CacheKeyInputs& in) { in.headers.pop_back(); }},
  };
  std::set<std::string> seen{base.hex()};
  for (const auto& [what, change] : changes) {
    CAPTURE(what);
    auto in = fixed_inputs();
    change(in);
    CHECK(seen.insert(make_cache_key(in).hex()).second);
  }
}

TEST_CASE("cache key encodes lengths, so moving bytes between fields changes it") {
  auto a = fixed_inputs();
  auto b = fixed_inputs();
  a.options = {"-a", "b"};
  b.options = {"-ab"};
  CHECK(make_cache_key(a) != make_cache_key(b));
  b.options = {"-a", "b", ""};
  CHECK(make_cache_key(a) != make_cache_key(b));

  a = fixed_inputs();
  b = fixed_inputs();
  a.module = "ab";
  a.source = "c";
  b.module = "a";
  b.source = "bc";
  CHECK(make_cache_key(a) != make_cache_key(b));

  a = fixed_inputs();
  b = fixed_inputs();
  a.options = {};
  a.module = "x";
  b.options = {"x"};
  b.module = "";
  CHECK(make_cache_key(a) != make_cache_key(b));
}

TEST_CASE("cache key does not depend on the order headers are listed in") {
  auto in = fixed_inputs();
  std::swap(in.headers[0], in.headers[1]);
  CHECK(make_cache_key(in) == make_cache_key(fixed_inputs()));
}

TEST_CASE("cache key hex is 32 lowercase digits and parses back; anything else does not parse") {
  const CacheKey key = make_cache_key(fixed_inputs());
  const std::string hex = key.hex();
  CHECK(hex.size() == 32);
  CHECK(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
  REQUIRE(parse_cache_key(hex).has_value());
  CHECK(*parse_cache_key(hex) == key);
  std::string upper = hex;
  upper[0] = 'A';
  for (const std::string& bad : {std::string(), hex.substr(1), hex + "0", upper, std::string(31, '0') + "g"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_cache_key(bad).has_value());
  }
}

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <set>

#include "cache/cache_key.hpp"
#include "runtime/module_provider.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"
#include "jit/registry.hpp"

using namespace kiln;

namespace {

CacheKeyInputs fixed_inputs() {
  CacheKeyInputs in;
  in.format_version = 3;
  in.nvrtc_build = "build-id 65be0db342ad51a06876e71e210bccc5aa8322cf";
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
  // Version 1 keyed NVRTC by major.minor only; 2 adds its exact build (CacheKeyInputs::nvrtc_build);
  // 3 keys on the build alone, which a process reads from the library file without loading NVRTC.
  CHECK(cache_format_version == 3);
  CHECK(make_cache_key(fixed_inputs()).hex() == "0bc3282c5744cd79d8b7bf40c72188b3");
}

TEST_CASE("cache key is the same for the same inputs and differs when any input changes") {
  const CacheKey base = make_cache_key(fixed_inputs());
  CHECK(make_cache_key(fixed_inputs()) == base);

  const std::vector<std::pair<const char*, std::function<void(CacheKeyInputs&)>>> changes = {
      {"format version", [](CacheKeyInputs& in) { in.format_version = 2; }},
      {"nvrtc build", [](CacheKeyInputs& in) { in.nvrtc_build = "build-id 65be0db342ad51a06876e71e210bccc5aa8322d0"; }},
      {"nvrtc build unknown", [](CacheKeyInputs& in) { in.nvrtc_build = ""; }},
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

TEST_CASE("cache key: two NVRTC builds of one major.minor give different keys") {
  // Why: nvrtcVersion says 13.0 for every 13.0.x patch release, whose code generation may differ.
  auto patch_88 = fixed_inputs();
  auto patch_90 = fixed_inputs();
  patch_88.nvrtc_build = "13.0 Compiler Build ID: CL-36424714; Cuda compilation tools, release 13.0, V13.0.88";
  patch_90.nvrtc_build = "13.0 Compiler Build ID: CL-36836380; Cuda compilation tools, release 13.0, V13.0.90";
  CHECK(make_cache_key(patch_88) != make_cache_key(patch_90));
}

TEST_CASE("cache key: NVRTC's build is exact, read from its file without loading it, and read once") {
  const std::string& build = nvrtc_build();
  CAPTURE(build);
  CHECK(&nvrtc_build() == &build);  // one string per process
  // Why this order of checks: nvrtc_build must not have loaded NVRTC (it reads the file).
  CHECK_FALSE(nvrtc_load_attempted());

  // The file's build ID, and the same ID in the library once mapped (what the loader sees).
  const auto id = nvrtc_library_build_id();
  REQUIRE(id.has_value());  // the toolkit's libnvrtc.so.13 carries a GNU build ID
  CHECK(id->size() >= 16);
  CHECK(id->find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(build == "build-id " + *id);
  CHECK_FALSE(nvrtc_load_attempted());

  const auto version = nvrtc_version();  // loads NVRTC
  REQUIRE(version.has_value());
  CHECK(nvrtc_load_attempted());
  const auto lines = nvrtc_ptx_build_lines();
  REQUIRE(lines.has_value());
  CAPTURE(*lines);
  CHECK_THAT(*lines, Catch::Contains("release " + version->str() + ", V" + version->str() + "."));
  CHECK_THAT(*lines, Catch::Contains("Build ID"));
}

TEST_CASE("cache key: module_cache_key covers the NVRTC build and stays cheap after the first call") {
  const KernelSource* source = find_module("per_token_group_quant_fp8");
  REQUIRE(source != nullptr);
  const Target target{{9, 0}, true, OutputKind::cubin};
  const std::vector<std::string> options = {"-arch=sm_90a", "-std=c++17", "-default-device"};
  const CacheKey first = module_cache_key(*source, target, options);

  CacheKeyInputs inputs;
  inputs.nvrtc_build = nvrtc_build();
  const std::string name = target.name();
  inputs.target = name;
  inputs.kind = target.kind;
  inputs.options = options;
  inputs.module = source->module;
  inputs.source = source->text;
  inputs.headers = embedded_headers();
  CHECK(make_cache_key(inputs) == first);
  const std::string major_minor = nvrtc_version().value_or(Version{}).str();
  inputs.nvrtc_build = major_minor;  // what version 1 keyed on

  CHECK(make_cache_key(inputs) != first);

  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) CHECK(module_cache_key(*source, target, options) == first);
  const double ms_each =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / 100;
  // Why 5 ms: hashing the source and headers takes microseconds; NVRTC's start-up, if the build
  // were worked out again per call, takes tens of milliseconds.
  CHECK(ms_each < 5);
}

#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "jit/target_select.hpp"
#include "kiln/error.hpp"
#include "runtime/cuda_backend.hpp"

using namespace kiln;

namespace {

// nvrtcGetSupportedArchs of real releases (13.0 checked against the installed NVRTC in test_compiler).
const std::vector<int> NVRTC_12_0{50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90};
const std::vector<int> NVRTC_12_8{50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 120};
const std::vector<int> NVRTC_12_9{50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121};
const std::vector<int> NVRTC_13_0{75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};

struct Row {
  const char* what;
  ComputeCapability device;
  const std::vector<int>* archs;
  std::optional<Version> nvrtc;
  std::optional<Version> driver;
  const char* expected;  ///< target name, or "" for none
  const char* reason;    ///< a phrase the reason must contain
};

/// Restores one environment variable when the test ends.
class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* value = std::getenv(name)) saved_ = value;
  }
  ~EnvGuard() {
    if (saved_)
      setenv(name_, saved_->c_str(), 1);
    else
      unsetenv(name_);
  }
  void set(const char* value) const { setenv(name_, value, 1); }
  void unset() const { unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

}  // namespace

TEST_CASE("select_target: the table") {
  const Version v12_0{12, 0}, v12_6{12, 6}, v12_8{12, 8}, v12_9{12, 9}, v13_0{13, 0}, v13_1{13, 1};
  const std::vector<Row> rows{
      // Exact-arch CUBIN whenever NVRTC knows the arch; `a` from 9.0.
      {"T4", {7, 5}, &NVRTC_13_0, v13_0, v13_0, "sm_75", "exact-arch CUBIN"},
      {"A100", {8, 0}, &NVRTC_13_0, v13_0, v13_0, "sm_80", "exact-arch CUBIN"},
      {"A10/RTX 30", {8, 6}, &NVRTC_13_0, v13_0, v13_0, "sm_86", "exact-arch CUBIN"},
      {"L4/L40/RTX 40", {8, 9}, &NVRTC_13_0, v13_0, v13_0, "sm_89", "exact-arch CUBIN"},
      {"H100/H200", {9, 0}, &NVRTC_13_0, v13_0, v13_0, "sm_90a", "arch-specific"},
      {"B200", {10, 0}, &NVRTC_13_0, v13_0, v13_0, "sm_100a", "arch-specific"},
      {"B300", {10, 3}, &NVRTC_13_0, v13_0, v13_0, "sm_103a", "arch-specific"},
      {"RTX 50", {12, 0}, &NVRTC_13_0, v13_0, v13_0, "sm_120a", "arch-specific"},
      {"GB10", {12, 1}, &NVRTC_13_0, v13_0, v13_0, "sm_121a", "arch-specific"},
      {"H100, NVRTC 12.0", {9, 0}, &NVRTC_12_0, v12_0, v12_0, "sm_90a", "exact-arch CUBIN"},
      {"A100, NVRTC 12.8", {8, 0}, &NVRTC_12_8, v12_8, v12_8, "sm_80", "exact-arch CUBIN"},
      {"B300, NVRTC 12.9", {10, 3}, &NVRTC_12_9, v12_9, v12_9, "sm_103a", "exact-arch CUBIN"},
      {"GB10, NVRTC 12.9", {12, 1}, &NVRTC_12_9, v12_9, v12_9, "sm_121a", "exact-arch CUBIN"},
      {"V100, NVRTC 12.8", {7, 0}, &NVRTC_12_8, v12_8, v12_8, "sm_70", "exact-arch CUBIN"},
      // CUBIN does not depend on the driver being as new as NVRTC.
      {"H200, driver older than NVRTC", {9, 0}, &NVRTC_13_0, v13_0, v12_6, "sm_90a", "exact-arch CUBIN"},
      {"H200, no driver (offline)", {9, 0}, &NVRTC_13_0, v13_0, std::nullopt, "sm_90a", "exact-arch CUBIN"},
      // A GPU newer than NVRTC: PTX for the newest compute_ not above it, never with `a`.
      {"future sm_130, driver newer", {13, 0}, &NVRTC_13_0, v13_0, v13_1, "compute_121", "driver 13.1"},
      {"future sm_130, driver equal", {13, 0}, &NVRTC_13_0, v13_0, v13_0, "compute_121", "does not know sm_130"},
      {"future sm_130, driver unknown", {13, 0}, &NVRTC_13_0, v13_0, std::nullopt, "compute_121",
       "driver version unknown"},
      {"GB10, NVRTC 12.8", {12, 1}, &NVRTC_12_8, v12_8, v12_9, "compute_120", "does not know sm_121"},
      {"B300, NVRTC 12.8", {10, 3}, &NVRTC_12_8, v12_8, v12_8, "compute_101", "does not know sm_103"},
      {"B200, NVRTC 12.0", {10, 0}, &NVRTC_12_0, v12_0, v12_8, "compute_90", "does not know sm_100"},
      // ... but only when the driver is at least as new as NVRTC.
      {"future sm_130, driver older", {13, 0}, &NVRTC_13_0, v13_0, v12_9, "", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
      {"GB10, NVRTC 12.8, driver 12.6", {12, 1}, &NVRTC_12_8, v12_8, v12_6, "", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
      {"future sm_130, NVRTC 13.1, driver 13.0", {13, 0}, &NVRTC_13_0, v13_1, v13_0, "", "driver is 13.0"},
      // No target at all.
      {"V100, NVRTC 13.0 dropped it", {7, 0}, &NVRTC_13_0, v13_0, v13_0, "", "no longer supports sm_70"},
      {"no NVRTC", {9, 0}, &NVRTC_13_0, std::nullopt, v13_0, "", "NVRTC is not available"},
      {"NVRTC without archs", {9, 0}, nullptr, v13_0, v13_0, "", "no supported archs"},
      {"no compute capability", {0, 0}, &NVRTC_13_0, v13_0, v13_0, "", "not valid"},
  };
  const std::vector<int> none;
  for (const auto& row : rows) {
    CAPTURE(row.what);
    const auto choice = select_target({row.device, row.archs ? *row.archs : none, row.nvrtc, row.driver});
    CAPTURE(choice.reason);
    CHECK(choice.reason.find(row.reason) != std::string::npos);
    if (*row.expected == '\0') {
      CHECK_FALSE(choice.target.has_value());
      continue;
    }
    REQUIRE(choice.target.has_value());
    CHECK(choice.target->name() == row.expected);
    CHECK(choice.target->kind == (choice.target->name().rfind("sm_", 0) == 0 ? OutputKind::cubin : OutputKind::ptx));
  }
}

TEST_CASE("select_target: the a suffix exactly from 9.0, and PTX fallbacks never claim it") {
  for (int arch : NVRTC_13_0) {
    CAPTURE(arch);
    const auto choice = select_target({compute_capability_of(arch), NVRTC_13_0, Version{13, 0}, Version{13, 0}});
    REQUIRE(choice.target.has_value());
    CHECK(choice.target->arch_specific == (arch >= 90));
    CHECK(choice.target->kind == OutputKind::cubin);
    CHECK(choice.target->cc == compute_capability_of(arch));
  }
  const auto future = select_target({{13, 0}, NVRTC_13_0, Version{13, 0}, Version{13, 0}});
  REQUIRE(future.target.has_value());
  CHECK_FALSE(future.target->arch_specific);
  CHECK(future.target->cc == ComputeCapability{12, 1});
}

TEST_CASE("families: hopper only on sm_90 and sm_90a") {
  CHECK(parse_target("sm_90a").carries("hopper"));
  CHECK(parse_target("sm_90").carries("hopper"));
  for (const char* name : {"sm_75", "sm_80", "sm_86", "sm_89", "sm_100a", "sm_103a", "sm_120a", "sm_121a",
                           "compute_90", "compute_90a", "compute_121"}) {
    CAPTURE(name);
    CHECK_FALSE(parse_target(name).carries("hopper"));
    CHECK(parse_target(name).carries("common"));
  }
  CHECK_FALSE(parse_target("sm_90a").carries("ampere"));
  CHECK_FALSE(parse_target("sm_90a").carries(""));

  const auto h200 = select_target({{9, 0}, NVRTC_13_0, Version{13, 0}, Version{13, 0}});
  const auto gb10 = select_target({{12, 1}, NVRTC_13_0, Version{13, 0}, Version{13, 0}});
  REQUIRE(h200.target.has_value());
  REQUIRE(gb10.target.has_value());
  CHECK(h200.target->carries("hopper"));
  CHECK_FALSE(gb10.target->carries("hopper"));
}

TEST_CASE("parse_target: every accepted form round-trips through name()") {
  struct Case {
    const char* text;
    ComputeCapability cc;
    bool arch_specific;
    OutputKind kind;
  };
  for (const auto& c : std::vector<Case>{{"sm_75", {7, 5}, false, OutputKind::cubin},
                                         {"sm_90", {9, 0}, false, OutputKind::cubin},
                                         {"sm_90a", {9, 0}, true, OutputKind::cubin},
                                         {"sm_121", {12, 1}, false, OutputKind::cubin},
                                         {"sm_121a", {12, 1}, true, OutputKind::cubin},
                                         {"compute_120", {12, 0}, false, OutputKind::ptx},
                                         {"compute_90a", {9, 0}, true, OutputKind::ptx},
                                         {"sm_130", {13, 0}, false, OutputKind::cubin}}) {
    CAPTURE(c.text);
    const Target target = parse_target(c.text);
    CHECK(target == Target{c.cc, c.arch_specific, c.kind});
    CHECK(target.name() == c.text);
  }
  CHECK(to_string(OutputKind::cubin) == "cubin");
  CHECK(to_string(OutputKind::ptx) == "ptx");
}

TEST_CASE("parse_target: nonsense is an error naming the text and the accepted forms") {
  for (const char* text : {"", "sm_", "sm_9", "sm_1000", "sm_090", "sm_80a", "compute_75a", "SM_90", "sm_90 ",
                           " sm_90", "sm_90f", "sm_90aa", "90", "9.0", "sm90a", "sm_9a0", "compute_", "gfx90a"}) {
    CAPTURE(text);
    try {
      parse_target(text);
      FAIL("accepted '" << text << "'");
    } catch (const Error& e) {
      const std::string message = e.what();
      CHECK(message.find("'" + std::string(text) + "'") != std::string::npos);
      CHECK(message.find("sm_NNa") != std::string::npos);
    }
  }
}

TEST_CASE("parse_supported_target: checks the arch against NVRTC's list, names the source") {
  CHECK(parse_supported_target("sm_90a", NVRTC_13_0, "KILN_ARCH") == Target{{9, 0}, true, OutputKind::cubin});
  CHECK(parse_supported_target("compute_121", NVRTC_13_0, "KILN_ARCH").kind == OutputKind::ptx);
  CHECK(parse_supported_target("sm_95", {}, "KILN_ARCH").name() == "sm_95");  // no list: syntax only
  CHECK_THROWS_WITH(parse_supported_target("sm_95", NVRTC_13_0, "KILN_ARCH"),
                    Catch::Contains("KILN_ARCH") && Catch::Contains("sm_95") && Catch::Contains("75, 80"));
  CHECK_THROWS_WITH(parse_supported_target("sm_70", NVRTC_13_0, "--arch"), Catch::Contains("--arch"));
  CHECK_THROWS_WITH(parse_supported_target("sm_80a", NVRTC_13_0, "--arch"),
                    Catch::Contains("--arch") && Catch::Contains("'sm_80a'") && Catch::Contains("only from 90"));
}

TEST_CASE("nvrtc_targets: one CUBIN target per NVRTC arch, ascending, a from 90") {
  std::vector<std::string> names;
  for (const auto& target : nvrtc_targets(NVRTC_13_0)) names.push_back(target.name());
  CHECK(names == std::vector<std::string>{"sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90a",
                                          "sm_100a", "sm_103a", "sm_110a", "sm_120a", "sm_121a"});
  CHECK(nvrtc_targets({121, 90, 90, 75}).size() == 3);
  CHECK(nvrtc_targets({}).empty());
}

TEST_CASE("KILN_ARCH: unset, valid, nonsense; auto follows it") {
  const EnvGuard arch("KILN_ARCH");
  arch.unset();
  CHECK_FALSE(target_override_from_env().has_value());
  CHECK(auto_target().name() == "sm_90a");

  arch.set("sm_120");
  REQUIRE(target_override_from_env().has_value());
  CHECK(target_override_from_env()->name() == "sm_120");
  CHECK(auto_target().name() == "sm_120");

  arch.set("hopper");
  CHECK_THROWS_WITH(target_override_from_env(),
                    Catch::Contains("KILN_ARCH") && Catch::Contains("'hopper'") && Catch::Contains("sm_NN"));
  CHECK_THROWS_AS(auto_target(), Error);
}

TEST_CASE("Version: order and text") {
  CHECK(Version{12, 9} < Version{13, 0});
  CHECK(Version{13, 0} < Version{13, 1});
  CHECK_FALSE(Version{13, 0} < Version{13, 0});
  CHECK(Version{13, 0}.str() == "13.0");
  CHECK(compute_capability_of(121) == ComputeCapability{12, 1});
  CHECK(compute_capability_of(90) == ComputeCapability{9, 0});
}

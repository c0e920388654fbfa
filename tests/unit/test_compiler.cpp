#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <clocale>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "jit/c_locale.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "jit/registry.hpp"
#include "jit/target_select.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

using namespace kiln;

namespace {

const KernelSource& module_named(std::string_view name) {
  const KernelSource* source = find_module(name);
  REQUIRE(source != nullptr);
  return *source;
}

KernelSource test_source(std::string module, std::string_view text) {
  KernelSource source;
  source.module = std::move(module);
  source.family = "common";
  source.entries = {"kiln_test_entry"};
  source.text = text;
  return source;
}

bool is_elf(const std::vector<std::uint8_t>& bytes) {
  return bytes.size() > 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F';
}

struct Outcome {
  const KernelSource* source = nullptr;
  Target target;
  std::optional<CompiledModule> module;
  std::string error;
};

/// Compile every (source, target) on all cores. Catch2 assertions are not thread-safe, so the
/// workers only record outcomes; the test checks them afterwards.
void compile_all(std::vector<Outcome>& outcomes, unsigned threads) {
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i; (i = next++) < outcomes.size();) {
      auto& o = outcomes[i];
      try {
        o.module = compile_module(*o.source, o.target, compile_options(o.target, false));
      } catch (const std::exception& e) {
        o.error = e.what();
      }
    }
  };
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) workers.emplace_back(work);
  for (auto& worker : workers) worker.join();
}

/// Switches the process to a locale whose decimal separator is a comma, generated with localedef
/// into a temporary folder when the system has the de_DE source but no compiled locale; back to
/// "C" (and the folder removed) at the end.
class CommaLocale {
 public:
  CommaLocale() {
    for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8"})
      if (std::setlocale(LC_ALL, name) != nullptr) {
        name_ = name;
        return;
      }
    if (!std::filesystem::exists("/usr/share/i18n/locales/de_DE")) return;
    generated_ = std::filesystem::temp_directory_path() / ("kiln-locale-" + std::to_string(::getpid()));
    std::filesystem::create_directories(generated_);
    const std::string command =
        "localedef -i de_DE -f UTF-8 '" + (generated_ / "de_DE.UTF-8").string() + "' >/dev/null 2>&1";
    if (std::system(command.c_str()) != 0) return;
    setenv("LOCPATH", generated_.c_str(), 1);
    if (std::setlocale(LC_ALL, "de_DE.UTF-8") != nullptr) name_ = "de_DE.UTF-8 (generated)";
  }
  ~CommaLocale() {
    std::setlocale(LC_ALL, "C");
    if (generated_.empty()) return;
    unsetenv("LOCPATH");
    std::error_code ignored;
    std::filesystem::remove_all(generated_, ignored);
  }
  CommaLocale(const CommaLocale&) = delete;
  CommaLocale& operator=(const CommaLocale&) = delete;

  /// The locale's name, or nothing when none could be set.
  const std::optional<std::string>& name() const { return name_; }

 private:
  std::optional<std::string> name_;
  std::filesystem::path generated_;
};

constexpr const char* FLOATS_SOURCE =
    "extern \"C\" __global__ void kiln_test_entry(float* p, double* d) {\n"
    "  p[0] = 2.5f * p[1] + 1.25e-3f;\n"
    "  d[0] = 3.14159265358979 * d[1] + 2.2204460492503131e-16;\n"
    "}\n";

}  // namespace

TEST_CASE("compile_options: deterministic, arch first, lineinfo last") {
  const Target h200{{9, 0}, true, OutputKind::cubin};
  CHECK(compile_options(h200, false) == std::vector<std::string>{"-arch=sm_90a", "-std=c++17", "-default-device"});
  CHECK(compile_options(h200, true) ==
        std::vector<std::string>{"-arch=sm_90a", "-std=c++17", "-default-device", "-lineinfo"});
  CHECK(compile_options(h200, true) == compile_options(h200, true));
  CHECK(compile_options(Target{{12, 1}, false, OutputKind::ptx}, false).front() == "-arch=compute_121");

  const char* saved = std::getenv("KILN_LINEINFO");
  const std::optional<std::string> restore = saved ? std::optional<std::string>(saved) : std::nullopt;
  setenv("KILN_LINEINFO", "1", 1);
  CHECK(Compiler().lineinfo());
  CHECK(Compiler().options(h200).back() == "-lineinfo");
  setenv("KILN_LINEINFO", "maybe", 1);
  CHECK_FALSE(Compiler().lineinfo());
  unsetenv("KILN_LINEINFO");
  CHECK_FALSE(Compiler().lineinfo());
  CHECK(Compiler(true).options(h200) == compile_options(h200, true));
  if (restore) setenv("KILN_LINEINFO", restore->c_str(), 1);
}

TEST_CASE("NVRTC reports its version and archs; 13.0's list is the one the target tables use") {
  const auto version = nvrtc_version();
  REQUIRE(version.has_value());
  CHECK_FALSE(*version < Version{12, 0});
  const auto archs = nvrtc_supported_archs();
  REQUIRE_FALSE(archs.empty());
  CHECK(std::is_sorted(archs.begin(), archs.end()));
  CHECK(std::find(archs.begin(), archs.end(), 90) != archs.end());
  if (*version == Version{13, 0})
    CHECK(archs == std::vector<int>{75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121});
}

TEST_CASE("every embedded module compiles for every arch NVRTC knows; hopper only for sm_90/sm_90a") {
  const auto archs = nvrtc_supported_archs();
  REQUIRE_FALSE(archs.empty());
  std::vector<Target> targets = nvrtc_targets(archs);
  targets.push_back(Target{{9, 0}, false, OutputKind::cubin});                           // sm_90 without a
  targets.push_back(Target{compute_capability_of(archs.back()), false, OutputKind::ptx});  // a GPU newer than NVRTC

  std::vector<Outcome> outcomes;
  for (const auto& source : embedded_modules())
    for (const auto& target : targets) outcomes.push_back({&source, target, std::nullopt, {}});
  compile_all(outcomes, std::max(1u, std::thread::hardware_concurrency()));

  std::size_t compiled = 0;
  for (const auto& o : outcomes) {
    CAPTURE(o.source->module, o.target.name(), o.error);
    if (!o.target.carries(o.source->family)) {
      CHECK_FALSE(o.module.has_value());
      CHECK(o.error.find("does not carry") != std::string::npos);
      continue;
    }
    REQUIRE(o.module.has_value());
    ++compiled;
    CHECK(o.module->module == o.source->module);
    CHECK(o.module->target == o.target);
    CHECK(o.module->options == compile_options(o.target, false));
    CHECK(o.module->compile_ms > 0);
    CHECK_FALSE(o.module->ptx.empty());
    CHECK(o.module->ptx.find('\0') == std::string::npos);
    for (const auto& entry : o.source->entries) CHECK(o.module->ptx.find(".entry " + entry + "(") != std::string::npos);
    if (o.target.kind == OutputKind::cubin)
      CHECK(is_elf(o.module->cubin));
    else
      CHECK(o.module->cubin.empty());
  }
  CHECK(compiled >= archs.size() + 2);  // the common modules on every arch, the twin on sm_90a and sm_90
}

TEST_CASE("the two quantizer modules: the shared one everywhere, the Hopper twin's sm_90a CUBIN is ELF") {
  const auto& shared = module_named(ops::FP8_QUANT_MODULE);
  const auto& twin = module_named(ops::FP8_QUANT_HOPPER_MODULE);
  const Target h200{{9, 0}, true, OutputKind::cubin};

  const auto twin_h200 = compile_module(twin, h200, compile_options(h200, false));
  CHECK(is_elf(twin_h200.cubin));
  CHECK(twin_h200.cubin.size() > 1000);
  CHECK(twin_h200.ptx.find(".entry " + std::string(ops::FP8_QUANT_HOPPER_ENTRY) + "(") != std::string::npos);
  CHECK(twin_h200.ptx.find(".target sm_90a") != std::string::npos);

  const auto shared_gb10 = compile_module(shared, parse_target("sm_121a"), compile_options(parse_target("sm_121a"), false));
  CHECK(is_elf(shared_gb10.cubin));
  CHECK(shared_gb10.ptx.find(".entry " + std::string(ops::FP8_QUANT_ENTRY) + "(") != std::string::npos);

  for (const char* name : {"sm_80", "sm_100a", "sm_121a", "compute_90"}) {
    CAPTURE(name);
    const Target target = parse_target(name);
    try {
      compile_module(twin, target, compile_options(target, false));
      FAIL("the twin compiled for " << name);
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("hopper") != std::string::npos);
      CHECK(e.context().call == "compile_module");
      CHECK(e.context().target == name);
      CHECK(e.context().log.empty());  // NVRTC never ran
    }
  }
}

TEST_CASE("embedded headers reach NVRTC by name") {
  // Why the default variant's parameters first: the family's kernel header compiles only for a variant.
  std::string text = "#define KILN_Q_IN 0\n#define KILN_Q_GROUP 128\n#define KILN_Q_OUT 0\n#define KILN_Q_SCALES 0\n"
                     "#define KILN_Q_UE8M0 0\n#define KILN_Q_SILU 0\n";
  for (const auto& header : embedded_headers()) text += "#include \"" + header.name + "\"\n";
  text += "extern \"C\" __global__ void kiln_test_entry(float* p) { p[0] = 1.0f; }\n";
  const auto source = test_source("includes_every_header", text);
  const Target target = parse_target("sm_90a");
  const auto module = compile_module(source, target, compile_options(target, false));
  CHECK(module.ptx.find(".entry kiln_test_entry(") != std::string::npos);
}

TEST_CASE("a failed compile: one error type with module, target, options, log, and numbered source") {
  const std::string text =
      "#include \"fp8_e4m3.cuh\"\n"
      "extern \"C\" __global__ void kiln_test_entry(float* p) {\n"
      "  p[0] = oops;\n"
      "}\n";
  const auto source = test_source("broken_for_test", text);
  const Target target = parse_target("sm_90a");
  const auto options = compile_options(target, true);
  try {
    compile_module(source, target, options);
    FAIL("a broken source compiled");
  } catch (const Error& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(message.find("module 'broken_for_test' does not compile for sm_90a") != std::string::npos);
    CHECK(message.find("broken_for_test.cu(3): error: identifier \"oops\" is undefined") != std::string::npos);
    CHECK(message.find("  > 3 |   p[0] = oops;\n") != std::string::npos);
    CHECK(message.find("    2 | extern \"C\"") != std::string::npos);
    CHECK(message.find("-lineinfo") != std::string::npos);
    CHECK(e.context().call == "nvrtcCompileProgram");
    CHECK(e.context().module == "broken_for_test");
    CHECK(e.context().target == "sm_90a");
    CHECK(e.context().options == options);
    CHECK(e.context().log.find("identifier \"oops\" is undefined") != std::string::npos);
  }

  // A variant's text: #defines, then `#line 1`, so NVRTC numbers the family's lines; the excerpt
  // must show those lines, not the ones the defines push down.
  const std::string defines = "// variant broken_variant_for_test\n#define KILN_TEST_A 1\n#define KILN_TEST_B 2\n#line 1\n";
  const std::string variant_text = defines + text;
  auto variant = test_source("broken_variant_for_test", variant_text);
  variant.prelude_bytes = defines.size();
  try {
    compile_module(variant, target, options);
    FAIL("a broken variant compiled");
  } catch (const Error& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(message.find("broken_variant_for_test.cu(3): error: identifier \"oops\" is undefined") != std::string::npos);
    CHECK(message.find("  > 3 |   p[0] = oops;\n") != std::string::npos);
  }

  const auto bad_option = test_source("bad_option_for_test", FLOATS_SOURCE);
  CHECK_THROWS_WITH(compile_module(bad_option, target, {"-arch=sm_90a", "--no-such-option"}),
                    Catch::Contains("bad_option_for_test") && Catch::Contains("NVRTC_ERROR_INVALID_OPTION"));
}

TEST_CASE("concurrent compiles from 8 threads match a serial compile") {
  const auto& shared = module_named(ops::FP8_QUANT_MODULE);
  const auto& twin = module_named(ops::FP8_QUANT_HOPPER_MODULE);
  const Target h200 = parse_target("sm_90a");
  const auto options = compile_options(h200, false);
  const auto serial_shared = compile_module(shared, h200, options);
  const auto serial_twin = compile_module(twin, h200, options);

  std::vector<Outcome> outcomes;
  for (int i = 0; i < 8; ++i) outcomes.push_back({i % 2 ? &twin : &shared, h200, std::nullopt, {}});
  compile_all(outcomes, 8);
  for (const auto& o : outcomes) {
    CAPTURE(o.source->module, o.error);
    REQUIRE(o.module.has_value());
    const auto& serial = o.source == &twin ? serial_twin : serial_shared;
    CHECK(o.module->ptx == serial.ptx);
    CHECK(o.module->cubin == serial.cubin);
  }
}

TEST_CASE("the process locale does not change what NVRTC produces, and compiling does not change it") {
  const auto source = test_source("floats_for_test", FLOATS_SOURCE);
  const Target target = parse_target("sm_90a");
  const auto options = compile_options(target, false);
  REQUIRE(std::setlocale(LC_ALL, "C") != nullptr);
  const auto in_c = compile_module(source, target, options);

  const CommaLocale comma;
  if (!comma.name()) {
    WARN("no comma-decimal locale available or generatable; only the C-locale compile was checked");
    return;
  }
  INFO("process locale " << *comma.name());
  REQUIRE(std::string(std::localeconv()->decimal_point) == ",");
  const std::string before = std::setlocale(LC_ALL, nullptr);
  const auto in_comma = compile_module(source, target, options);
  CHECK(in_comma.ptx == in_c.ptx);
  CHECK(in_comma.cubin == in_c.cubin);
  CHECK(std::setlocale(LC_ALL, nullptr) == before);
  CHECK(std::string(std::localeconv()->decimal_point) == ",");
  {
    const detail::ScopedCLocale c_locale;
    CHECK(std::string(std::localeconv()->decimal_point) == ".");
  }
  CHECK(std::string(std::localeconv()->decimal_point) == ",");
}

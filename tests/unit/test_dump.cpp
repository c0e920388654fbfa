#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/ringbuffer_sink.h>

#include "base/log.hpp"
#include "jit/compiler.hpp"
#include "jit/dump.hpp"
#include "jit/registry.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

/// A fresh folder path (not created) under the temp folder, removed at the end.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("kiln-dump-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// Sets an environment variable for one test and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (saved_)
      setenv(name_, saved_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

/// Collects what kiln logs at warn and above while it lives.
class WarningCapture {
 public:
  WarningCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)) {
    sink_->set_level(spdlog::level::warn);
    logger().sinks().push_back(sink_);
    previous_ = logger().level();
    if (previous_ > spdlog::level::warn) logger().set_level(spdlog::level::warn);
  }
  ~WarningCapture() {
    auto& sinks = logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger().set_level(previous_);
  }
  std::string text() const {
    std::string out;
    for (const auto& line : sink_->last_formatted()) out += line;
    return out;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum previous_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

KernelSource fake_source() {
  KernelSource source;
  source.module = "dump_test";
  source.family = "common";
  source.entries = {"dump_test_entry"};
  source.text = "extern \"C\" __global__ void dump_test_entry() {}\n";
  return source;
}

CompiledModule fake_module(OutputKind kind) {
  CompiledModule module;
  module.module = "dump_test";
  module.target = Target{{9, 0}, true, kind};
  module.options = {"-arch=" + module.target.name(), "-std=c++17"};
  module.ptx = ".version 9.0\n.target sm_90a\n";
  if (kind == OutputKind::cubin) module.cubin = {0x7f, 'E', 'L', 'F', 0, 1, 2, 255};
  module.log = "a warning\n";
  return module;
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("dump_module writes .cu, .options, .ptx, .cubin, .log into a folder it creates") {
  const TempDir temp;
  const fs::path dir = temp.path() / "nested" / "deeper";
  const auto source = fake_source();
  const auto module = fake_module(OutputKind::cubin);
  dump_module(module, source, dir.string());

  CHECK(listing(dir) == std::vector<std::string>{"dump_test.sm_90a.cu", "dump_test.sm_90a.cubin",
                                                  "dump_test.sm_90a.log", "dump_test.sm_90a.options",
                                                  "dump_test.sm_90a.ptx"});
  CHECK(read_file(dir / "dump_test.sm_90a.cu") == source.text);
  CHECK(read_file(dir / "dump_test.sm_90a.options") == "-arch=sm_90a\n-std=c++17\n");
  CHECK(read_file(dir / "dump_test.sm_90a.ptx") == module.ptx);
  const std::string cubin = read_file(dir / "dump_test.sm_90a.cubin");
  CHECK(std::vector<std::uint8_t>(cubin.begin(), cubin.end()) == module.cubin);
  CHECK(read_file(dir / "dump_test.sm_90a.log") == module.log);

  auto changed = module;
  changed.ptx = "replaced\n";
  dump_module(changed, source, dir.string());
  CHECK(read_file(dir / "dump_test.sm_90a.ptx") == "replaced\n");
  CHECK(listing(dir).size() == 5);  // replaced in place, no temporary files left behind
}

TEST_CASE("dump_module: a PTX target has no .cubin; dump_file_names says the same") {
  const TempDir temp;
  const auto module = fake_module(OutputKind::ptx);
  dump_module(module, fake_source(), temp.path().string());
  CHECK(listing(temp.path()) == std::vector<std::string>{"dump_test.compute_90a.cu", "dump_test.compute_90a.log",
                                                         "dump_test.compute_90a.options",
                                                         "dump_test.compute_90a.ptx"});
  auto names = dump_file_names(module);
  std::sort(names.begin(), names.end());
  CHECK(names == listing(temp.path()));
  CHECK(dump_file_names(fake_module(OutputKind::cubin)).size() == 5);
}

TEST_CASE("dump_module throws kiln::Error naming the path when it cannot write") {
  const TempDir temp;
  fs::create_directories(temp.path());
  const fs::path file = temp.path() / "a_file";
  std::ofstream(file) << "not a folder";
  const std::string blocked = (file / "sub").string();
  CHECK_THROWS_WITH(dump_module(fake_module(OutputKind::cubin), fake_source(), blocked), Catch::Contains(blocked));
  CHECK_THROWS_AS(dump_module(fake_module(OutputKind::cubin), fake_source(), ""), Error);
}

TEST_CASE("dump_if_requested: unset does nothing, set writes, unwritable is one warning and no throw") {
  const TempDir temp;
  const auto source = fake_source();
  const auto module = fake_module(OutputKind::cubin);
  {
    const char* old = std::getenv("KILN_DUMP_DIR");
    const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
    unsetenv("KILN_DUMP_DIR");
    dump_if_requested(module, source);
    CHECK_FALSE(fs::exists(temp.path()));
    if (saved) setenv("KILN_DUMP_DIR", saved->c_str(), 1);
  }
  {
    const ScopedEnv dump("KILN_DUMP_DIR", temp.path().string());
    dump_if_requested(module, source);
    CHECK(fs::exists(temp.path() / "dump_test.sm_90a.ptx"));
  }
  {
    const fs::path file = temp.path() / "a_file";
    std::ofstream(file) << "not a folder";
    const ScopedEnv dump("KILN_DUMP_DIR", (file / "sub").string());
    const WarningCapture warnings;
    CHECK_NOTHROW(dump_if_requested(module, source));
    CAPTURE(warnings.text());
    CHECK(warnings.text().find("KILN_DUMP_DIR") != std::string::npos);
    CHECK(warnings.text().find("dump_test") != std::string::npos);
  }
}

TEST_CASE("Compiler dumps what it compiles when KILN_DUMP_DIR is set, and a dump failure is not a compile failure") {
  const auto* shared = find_module(ops::FP8_QUANT_MODULE);
  REQUIRE(shared != nullptr);
  const Target target = parse_target("sm_90a");
  const TempDir temp;
  {
    const ScopedEnv dump("KILN_DUMP_DIR", temp.path().string());
    const auto module = Compiler(false).compile(*shared, target);
    const std::string stem = shared->module + ".sm_90a";
    CHECK(read_file(temp.path() / (stem + ".ptx")) == module.ptx);
    CHECK(read_file(temp.path() / (stem + ".cu")) == shared->text);
    CHECK(fs::file_size(temp.path() / (stem + ".cubin")) == module.cubin.size());
  }
  {
    const fs::path file = temp.path() / "a_file";
    std::ofstream(file) << "not a folder";
    const ScopedEnv dump("KILN_DUMP_DIR", (file / "sub").string());
    const WarningCapture warnings;
    const auto module = Compiler(false).compile(*shared, target);
    CHECK_FALSE(module.cubin.empty());
    CHECK(warnings.text().find("KILN_DUMP_DIR") != std::string::npos);
  }
}

TEST_CASE("concurrent dumps of the same module leave whole files") {
  const TempDir temp;
  const auto source = fake_source();
  auto module = fake_module(OutputKind::cubin);
  module.ptx = std::string(1 << 20, 'p');  // big enough that a torn write would show
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      try {
        dump_module(module, source, temp.path().string());
      } catch (...) {
        ++failures;
      }
    });
  for (auto& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(read_file(temp.path() / "dump_test.sm_90a.ptx") == module.ptx);
  CHECK(listing(temp.path()).size() == 5);
}

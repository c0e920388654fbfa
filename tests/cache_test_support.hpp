#pragma once
// Shared by the disk cache tests: a temporary folder, a warning counter on kiln's logger, sample
// modules and keys, a counting compile function, and file helpers.

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>

#include <spdlog/sinks/base_sink.h>

#include "base/log.hpp"
#include "cache/cache_key.hpp"
#include "cache/disk/disk_cache.hpp"

namespace kiln::test {

/// mkdtemp under /tmp, removed with everything in it at the end of the scope.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/kiln-cache-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ignored);
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Counts the warnings kiln logs while it exists.
class WarningCounter {
 public:
  WarningCounter() : sink_(std::make_shared<Sink>()) { logger().sinks().push_back(sink_); }
  ~WarningCounter() {
    auto& sinks = logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::size_t count() const { return sink_->messages().size(); }
  std::string all() const {
    std::string out;
    for (const auto& message : sink_->messages()) out += message + "\n";
    return out;
  }

 private:
  class Sink : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::vector<std::string> messages() {
      std::lock_guard<std::mutex> lock(mutex_);
      return messages_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      if (msg.level == spdlog::level::warn) messages_.emplace_back(msg.payload.data(), msg.payload.size());
    }
    void flush_() override {}

   private:
    std::vector<std::string> messages_;
  };
  std::shared_ptr<Sink> sink_;
};

inline Target sm90a() { return Target{{9, 0}, true, OutputKind::cubin}; }
inline Target sm80() { return Target{{8, 0}, false, OutputKind::cubin}; }

inline CacheKey key_for(const std::string& module, const Target& target) {
  CacheKeyInputs inputs;
  inputs.nvrtc_build = "build-id test";
  const std::string name = target.name();
  inputs.target = name;
  inputs.kind = target.kind;
  inputs.options = {"-arch=" + name};
  inputs.module = module;
  const std::string source = "source of " + module;  // Why a local: inputs.source is a view
  inputs.source = source;
  return make_cache_key(inputs);
}

/// A module whose bytes are a function of its name and target, so any mix-up shows.
inline CompiledModule module_for(const std::string& module, const Target& target, std::size_t cubin_bytes = 1000) {
  CompiledModule out;
  out.module = module;
  out.target = target;
  out.options = {"-arch=" + target.name(), "--std=c++17"};
  out.ptx = "// ptx of " + module + " for " + target.name() + "\n";
  out.cubin.resize(cubin_bytes);
  for (std::size_t i = 0; i < cubin_bytes; ++i) out.cubin[i] = static_cast<std::uint8_t>(i * 31 + module.size());
  out.log = "log of " + module;
  out.compile_ms = 42.5;
  return out;
}

inline bool same_module(const CompiledModule& a, const CompiledModule& b) {
  return a.module == b.module && a.target == b.target && a.options == b.options && a.ptx == b.ptx &&
         a.cubin == b.cubin && a.log == b.log && a.compile_ms == b.compile_ms;
}

inline DiskCacheConfig config_for(const std::string& dir, std::uint64_t max_bytes = std::uint64_t{1} << 30,
                                  std::chrono::milliseconds lock_timeout = std::chrono::seconds(20)) {
  DiskCacheConfig config;
  config.dir = dir;
  config.max_bytes = max_bytes;
  config.lock_timeout = lock_timeout;
  config.nvrtc = Version{13, 0};
  return config;
}

inline const std::string quant = "per_token_group_quant_fp8";

/// A compile function that counts its calls.
struct FakeCompiler {
  std::atomic<int> calls{0};
  std::function<CompiledModule()> make(const std::string& module, const Target& target) {
    return [this, module, target] {
      ++calls;
      return module_for(module, target);
    };
  }
};

/// Whether anything (a symlink included, not followed) is at `path`.
inline bool exists(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

inline std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// Sets the access and modification times of `path` (not followed) to `seconds_ago`.
inline void set_age(const std::string& path, std::time_t seconds_ago) {
  const timespec when[2] = {{std::time(nullptr) - seconds_ago, 0}, {std::time(nullptr) - seconds_ago, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), when, AT_SYMLINK_NOFOLLOW) == 0);
}

inline std::size_t files_in(const std::string& dir) {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& item : std::filesystem::directory_iterator(dir)) ++count;
  return count;
}

}  // namespace kiln::test

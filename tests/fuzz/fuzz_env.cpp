// Fuzz target: every parser of kiln's environment variables, on the same text.
//   parse_switch (KILN_CACHE, KILN_LINEINFO, KILN_FP8_ACT_QUANT_HOPPER through switch_lever),
//   parse_size and KILN_CACHE_MAX_BYTES (DiskCacheConfig::from_env), KILN_ARCH
//   (target_override_from_env, against the linked NVRTC's archs), KILN_LOG_LEVEL (spdlog's
//   level names, as base/config.cpp reads them).
// Invariants: parse_size agrees with a 128-bit reference; from_env takes the size when it is
// above zero and the default otherwise; a switch lever gives the parsed value or the fallback;
// KILN_ARCH gives a target that round-trips or a kiln::Error naming KILN_ARCH.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/sinks/null_sink.h>

#include "base/env.hpp"
#include "base/log.hpp"
#include "cache/disk/disk_cache.hpp"
#include "jit/target_select.hpp"
#include "kiln/error.hpp"

namespace {

using namespace kiln;

void require(bool condition) {
  if (!condition) std::abort();
}

/// parse_size another way: the compiler's overflow builtins instead of its bounds arithmetic.
std::optional<std::uint64_t> reference_size(std::string_view text) {
  const unsigned shift = text.empty() ? 0 : kiln::size_suffix_shift(text.back());
  if (shift != 0) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(value, 10u, &value) ||
        __builtin_add_overflow(value, static_cast<unsigned>(c - '0'), &value))
      return std::nullopt;
  }
  if (((value << shift) >> shift) != value) return std::nullopt;
  return value << shift;
}

/// Sets `name` to `value`, or unsets it when `value` is empty. Why not setenv: glibc keeps every
/// value setenv was ever given (a getenv pointer may still hold it), so millions of fuzzed values
/// ran the fuzzer past its 2 GB limit in a 7-minute run; putenv of one buffer per variable,
/// rewritten in place, allocates nothing per run once the buffer is as long as the longest value.
void set_fuzzed_env(const char* name, const std::string& value) {
  static std::map<std::string, std::vector<char>> entries;
  if (value.empty()) {
    ::unsetenv(name);
    return;
  }
  std::vector<char>& entry = entries[name];
  entry.assign(name, name + std::strlen(name));
  entry.push_back('=');
  entry.insert(entry.end(), value.begin(), value.end());
  entry.push_back('\0');
  require(::putenv(entry.data()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Why a null sink at trace: warnings about bad values are formatted (with the fuzzed text) but
  // not printed, which would slow the fuzzer down and flood the log.
  auto& log = logger();
  log.sinks().clear();
  log.sinks().push_back(std::make_shared<spdlog::sinks::null_sink_mt>());
  log.set_level(spdlog::level::trace);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Environment values end at the first NUL.
  const std::string value(text.c_str());

  const auto size_value = parse_size(text);
  require(size_value == reference_size(text));
  const auto word = parse_switch(text);
  if (word) require(text.size() <= 5);

  set_fuzzed_env("KILN_FUZZ_SWITCH", value);
  const auto word_value = parse_switch(value);  // an empty value is unset: no word, the fallback
  require(switch_lever("KILN_FUZZ_SWITCH", true) == (value.empty() || !word_value ? true : *word_value));
  require(switch_lever("KILN_FUZZ_SWITCH", false) == (value.empty() || !word_value ? false : *word_value));

  ::setenv("KILN_CACHE_DIR", "/nonexistent/kiln-fuzz", 1);  // from_env only names it; nothing is created
  set_fuzzed_env("KILN_CACHE_MAX_BYTES", value);
  const auto config = DiskCacheConfig::from_env();
  const auto wanted = value.empty() ? std::nullopt : parse_size(value);
  require(config.max_bytes == (wanted && *wanted > 0 ? *wanted : DiskCacheConfig{}.max_bytes));
  require(config.dir == std::optional<std::string>("/nonexistent/kiln-fuzz"));

  set_fuzzed_env("KILN_ARCH", value);
  try {
    const auto target = target_override_from_env();
    require(target.has_value() == !value.empty());
    if (target) require(parse_target(target->name()) == *target);
  } catch (const Error& e) {
    require(std::string(e.what()).rfind("KILN_ARCH: ", 0) == 0);
  }
  ::unsetenv("KILN_ARCH");

  const auto level = spdlog::level::from_str(text);
  require(level >= spdlog::level::trace && level <= spdlog::level::off);
  return 0;
}

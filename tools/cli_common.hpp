#pragma once
// Pieces several subcommands share.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/cuda_backend.hpp"
#include "jit/registry.hpp"
#include "jit/target_select.hpp"
#include "jit/variants.hpp"
#include "kiln/error.hpp"
#include "kiln/service.hpp"

namespace kiln::cli {

/// A CLI11 check for an unsigned integer option: decimal digits only, within [lo, hi] and a
/// multiple of `multiple`. Runs before CLI11 converts the text, so "-1", "abc", "1e3" and overflow
/// are reported as `--m: expected an integer in 1..2147483647, got '-1'` (CLI11 prefixes the option
/// name) rather than CLI11's bare "Could not convert" or a 300-digit double bound. Leading zeros
/// are decimal: `--m 010` is 10.
/// Inline: the CLI fuzzer links the pick command without this header's .cpp.
inline CLI::Validator integer_in(std::uint64_t lo, std::uint64_t hi, std::uint64_t multiple = 1) {
  const std::string expected = multiple == 1 ? "an integer in " + std::to_string(lo) + ".." + std::to_string(hi)
                                             : "a multiple of " + std::to_string(multiple) + " in " +
                                                   std::to_string(lo) + ".." + std::to_string(hi);
  auto check = [lo, hi, multiple, expected](std::string& text) -> std::string {
    const std::string failure = "expected " + expected + ", got '" + text + "'";
    if (text.empty()) return failure;
    std::uint64_t value = 0;
    for (const char c : text) {
      if (c < '0' || c > '9') return failure;
      const auto digit = static_cast<std::uint64_t>(c - '0');
      if (value > (UINT64_MAX - digit) / 10) return failure;
      value = value * 10 + digit;
    }
    if (value < lo || value > hi || value % multiple != 0) return failure;
    // Why rewrite the text: CLI11 reads a leading 0 as octal ("010" would be 8, "08" an error).
    text = std::to_string(value);
    return {};
  };
  return CLI::Validator(check, "UINT in " + std::to_string(lo) + ".." + std::to_string(hi), "integer_in");
}

/// A CLI11 check that the value is one of `choices`, in kiln's words:
/// `--twin: expected one of on, off, auto, got 'sometimes'` (CLI11's IsMember says "not in {...}").
/// Inline: the CLI fuzzer links the pick command without this header's .cpp.
inline CLI::Validator one_of(std::vector<std::string> choices) {
  std::string listed;
  for (const auto& choice : choices) listed += (listed.empty() ? "" : ", ") + choice;
  auto check = [choices, listed](std::string& text) -> std::string {
    for (const auto& choice : choices)
      if (text == choice) return {};
    return "expected one of " + listed + ", got '" + text + "'";
  };
  return CLI::Validator(check, "one of " + listed, "one_of");
}

/// Why a variant text (`family name=value ...`) is wrong before parse_variant sees it: a parameter
/// given twice (parse_variant would let the last one win). Empty when it is fine.
inline std::string repeated_parameter(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  for (const char c : std::string(text) + " ") {
    if (c == ' ' || c == '\t' || c == '\r') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string name = words[i].substr(0, words[i].find('='));
    for (std::size_t j = 1; j < i; ++j)
      if (words[j].substr(0, words[j].find('=')) == name)
        return "parameter '" + name + "' given twice ('" + words[j] + "', '" + words[i] + "'); give each once";
  }
  return {};
}

/// The variant that option `option` names (either spelling of parse_variant). A parameter given
/// twice, or anything parse_variant refuses, is a usage error (CLI::ValidationError naming the
/// option, what it expects and the value). Inline: the CLI fuzzer links the pick command alone.
inline Variant variant_from_option(const std::string& option, const std::string& text) {
  if (const std::string repeated = repeated_parameter(text); !repeated.empty())
    throw CLI::ValidationError(option, repeated + ", got '" + text + "'");
  try {
    return parse_variant(text);
  } catch (const Error& error) {
    throw CLI::ValidationError(option, error.what());
  }
}

/// A CLI11 check that the value names a file that exists and is not a folder (with `regular`, a
/// regular file: a bundle is mapped, a manifest may come through a pipe), in kiln's words:
/// `--variants: expected a variant manifest file, got '/tmp' (a folder)`. `what`: what the file is.
CLI::Validator existing_file(const std::string& what, bool regular = false);

/// `--arch`: a target name, `auto` (auto_target: KILN_ARCH, else the GPU's, else sm_90a) or `all`
/// (every arch NVRTC knows). Anything else is a usage error: CLI::ValidationError naming `--arch`
/// and the archs NVRTC knows. A bad KILN_ARCH (for `auto`) is a failure: kiln::Error.
std::vector<Target> requested_targets(const std::string& arch);

/// Runs `work(i)` for every i in [0, count) on up to `threads` threads (this one included).
/// `work` must not throw.
void parallel_for(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& work);

/// This process's counters as one JSON object (`kiln warm --json`, `kiln info --json`): the memory
/// caches' (summed over the services the command used) and the disk cache's. `compiles` and
/// `compile_ms` are the memory counters': NVRTC compiles only (the disk cache's own `compiles`
/// counts its compile steps, which with a remote tier include Redis fetches).
nlohmann::json counters_json(const ServiceCounters& counters);
/// The remote tier's counters (the `remote` object of counters_json).
nlohmann::json remote_counters_json(const RemoteCacheCounters& remote);

/// The whole of the file `path`, every read checked: a usage error of `option` naming `what`, the
/// path and the reason when it cannot be read or is a folder.
std::string read_whole_file(const std::string& path, const std::string& option, const std::string& what);

/// The modules of a variant manifest's variants (jit/variants.hpp: one per line, a canonical name or
/// `family name=value ...`, `#` starts a comment), for `warm --variants`, `pack --variants` and
/// `cache pull --variants`; a variant listed twice (in either spelling) comes once, in the order of
/// its first line. A file that cannot be read, a bad line or a parameter given twice on a line is
/// a usage error (CLI::ValidationError naming `option`, the file and the line); nothing is compiled.
std::vector<const KernelSource*> variant_manifest_sources(const std::string& path,
                                                          const std::string& option = "--variants");

/// What `kiln warm` (and `kiln cache pull`) handle: for each of `targets`, every module it carries,
/// then each of `variants` whose family it carries; every (module, target) once, in that order.
std::vector<std::pair<const KernelSource*, Target>> modules_for(const std::vector<Target>& targets,
                                                                const std::vector<const KernelSource*>& variants);

/// A parse error's message in kiln's words, for `kiln`'s usage errors: CLI11's "--m: 1 required
/// UINT:UINT in 1..2147483647 missing" (an option given without its value) becomes "--m: expected
/// a value (UINT in 1..2147483647), got none"; other messages are kept.
std::string usage_message(const CLI::ParseError& error);

}  // namespace kiln::cli

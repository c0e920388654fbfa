#pragma once
// Pieces several subcommands share.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "driver/cuda_backend.hpp"
#include "jit/registry.hpp"
#include "jit/target_select.hpp"
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

/// `--arch`: a target name, `auto` (auto_target: KILN_ARCH, else the GPU's, else sm_90a) or `all`
/// (every arch NVRTC knows). Anything else is a usage error: CLI::ValidationError naming `--arch`
/// and the archs NVRTC knows. A bad KILN_ARCH (for `auto`) is a failure: kiln::Error.
std::vector<Target> requested_targets(const std::string& arch);

/// Runs `work(i)` for every i in [0, count) on up to `threads` threads (this one included).
/// `work` must not throw.
void parallel_for(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& work);

/// This process's counters as one JSON object (`kiln warm --json`, `kiln info --json`): the memory
/// caches' (summed over the services the command used) and the disk cache's.
nlohmann::json counters_json(const ServiceCounters& counters);
/// The remote tier's counters (the `remote` object of counters_json).
nlohmann::json remote_counters_json(const RemoteCacheCounters& remote);

/// The modules of a variant manifest's variants (jit/variants.hpp: one per line, a canonical name or
/// `family name=value ...`), for `warm --variants` and `pack --variants`. A file that cannot be read
/// or a bad line is a usage error (CLI::ValidationError) naming the file and line; nothing is compiled.
std::vector<const KernelSource*> variant_manifest_sources(const std::string& path);

}  // namespace kiln::cli

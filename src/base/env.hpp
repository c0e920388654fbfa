#pragma once
/// @file
/// Parsing of kiln's environment variables (levers): pure parsers, so every rule is tested without
/// touching the process environment. base/config.hpp reads the variables.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// `1`, `true`, `on`, `yes` -> true; `0`, `false`, `off`, `no` -> false (case-insensitive, no
/// surrounding space); anything else -> nothing.
std::optional<bool> parse_switch(std::string_view text);

/// A decimal unsigned integer with an optional binary suffix `K`, `M`, `G`, `T` (KiB, MiB, ...);
/// nothing on overflow, sign, space or any other character.
std::optional<std::uint64_t> parse_size(std::string_view text);
/// The power of two a parse_size suffix stands for: 10 for K/k, 20 for M/m, 30 for G/g, 40 for T/t;
/// 0 for any other character (no suffix).
unsigned size_suffix_shift(char suffix);

/// The elements of a colon-separated list (KILN_CACHE_PATH, LD_LIBRARY_PATH), empty ones
/// skipped: for the loader an empty element means the working directory, which must never
/// decide which compiler runs or which cache is read.
std::vector<std::string> split_path_list(std::string_view text);

/// A switch lever: the parsed value of `name`, or `fallback` when unset; a bad value gives
/// `fallback` and logs one warning per process (however often it is read) naming the variable
/// and the accepted values. For switches outside Config (tests, fuzzing); defined in config.cpp,
/// which alone reads the environment.
bool switch_lever(const char* name, bool fallback);

}  // namespace kiln

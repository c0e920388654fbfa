#include "base/env.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

namespace kiln {

static bool equals_lower(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) != lower[i]) return false;
  return true;
}

std::vector<std::string> split_path_list(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(':', start), text.size());
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::optional<bool> parse_switch(std::string_view text) {
  for (auto word : {"1", "true", "on", "yes"})
    if (equals_lower(text, word)) return true;
  for (auto word : {"0", "false", "off", "no"})
    if (equals_lower(text, word)) return false;
  return std::nullopt;
}

unsigned size_suffix_shift(char suffix) {
  switch (suffix) {
    case 'K': case 'k': return 10;
    case 'M': case 'm': return 20;
    case 'G': case 'g': return 30;
    case 'T': case 't': return 40;
    default: return 0;
  }
}

std::optional<std::uint64_t> parse_size(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const unsigned shift = size_suffix_shift(text.back());
  if (shift != 0) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (shift != 0 && value > (max >> shift)) return std::nullopt;
  return value << shift;
}

}  // namespace kiln

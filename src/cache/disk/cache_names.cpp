#include "cache_names.hpp"

#include <cerrno>
#include <cstdint>

#include <sys/random.h>

#include "kiln/error.hpp"
#include "unique_fd.hpp"

namespace kiln::detail {

namespace {

constexpr std::size_t max_part = 64;

bool allowed(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '+' ||
         c == '-';
}

bool is_part(std::string_view text) {
  if (text.empty() || text.size() > max_part) return false;
  for (char c : text)
    if (!allowed(c)) return false;
  return true;
}

bool is_lower_hex(std::string_view text, std::size_t length) {
  if (text.size() != length) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string stem(const CacheKey& key, std::string_view module, std::string_view target) {
  return file_name_part(module) + "." + file_name_part(target) + "." + key.hex();
}

/// Splits at dots into `parts`; returns the count, or 0 when there are more than `max_parts`.
/// Why no vector: the eviction pass parses every name in the folder.
constexpr std::size_t max_parts = 6;
std::size_t split_dots(std::string_view name, std::string_view (&parts)[max_parts]) {
  for (std::size_t count = 0; count < max_parts; ++count) {
    const auto dot = name.find('.');
    parts[count] = name.substr(0, dot);
    if (dot == std::string_view::npos) return count + 1;
    name.remove_prefix(dot + 1);
  }
  return 0;
}

}  // namespace

std::string file_name_part(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, max_part)) out += allowed(c) ? c : '_';
  return out.empty() ? "_" : out;
}

std::string entry_file_name(const CacheKey& key, std::string_view module, std::string_view target) {
  return stem(key, module, target) + ".kiln";
}

std::string lock_file_name(const CacheKey& key, std::string_view module, std::string_view target) {
  return stem(key, module, target) + ".lock";
}

std::string temp_file_name(std::string_view entry_name) {
  std::uint64_t random = 0;
  for (;;) {
    const ssize_t got = ::getrandom(&random, sizeof random, 0);
    if (got == static_cast<ssize_t>(sizeof random)) break;
    if (got < 0 && errno != EINTR) {
      ErrorContext context;
      context.call = "getrandom";
      context.kind = ErrorKind::io;
      throw_error("getrandom failed: " + errno_text(errno), context);
    }
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string suffix(16, '0');
  for (int i = 0; i < 16; ++i) suffix[i] = digits[(random >> (4 * i)) & 0xf];
  return std::string(entry_name) + "." + suffix + ".tmp";
}

std::optional<CacheFileName> parse_cache_file_name(std::string_view name) {
  std::string_view parts[max_parts];
  const std::size_t count = split_dots(name, parts);
  CacheFileName parsed;
  if (count == 4 && parts[3] == "kiln") {
    parsed.kind = CacheFileKind::entry;
  } else if (count == 4 && parts[3] == "lock") {
    parsed.kind = CacheFileKind::lock;
  } else if (count == 6 && parts[3] == "kiln" && is_lower_hex(parts[4], 16) && parts[5] == "tmp") {
    parsed.kind = CacheFileKind::temp;
  } else {
    return std::nullopt;
  }
  if (!is_part(parts[0]) || !is_part(parts[1])) return std::nullopt;
  const auto key = parse_cache_key(parts[2]);
  if (!key) return std::nullopt;
  parsed.module = std::string(parts[0]);
  parsed.target = std::string(parts[1]);
  parsed.key = *key;
  return parsed;
}

}  // namespace kiln::detail

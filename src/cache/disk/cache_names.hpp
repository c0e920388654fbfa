#pragma once
// The names of kiln's files in a cache folder. Entries, temporary files and lock files have strict
// shapes, so `clear` and the eviction pass touch kiln's files and nothing else. Internal.
//
//   entry  <module>.<target>.<key hex>.kiln
//   temp   <module>.<target>.<key hex>.kiln.<16 hex>.tmp
//   lock   <module>.<target>.<key hex>.lock
//
// <module> and <target> are file_name_part() of the real names (the entry header holds those).

#include <optional>
#include <string>
#include <string_view>

#include "cache/cache_key.hpp"

namespace kiln::detail {

enum class CacheFileKind { entry, temp, lock };

struct CacheFileName {
  CacheFileKind kind = CacheFileKind::entry;
  std::string module;  ///< as it appears in the name
  std::string target;  ///< as it appears in the name
  CacheKey key;
};

/// `name` with every character outside [A-Za-z0-9_+-] replaced by '_', cut to 64 characters,
/// "_" when empty: never a path separator, a dot, or anything a shell would mangle.
std::string file_name_part(std::string_view name);

std::string entry_file_name(const CacheKey& key, std::string_view module, std::string_view target);
std::string lock_file_name(const CacheKey& key, std::string_view module, std::string_view target);
/// A fresh temporary name next to `entry_name`, unique across processes and machines (random).
std::string temp_file_name(std::string_view entry_name);

/// What `name` is, if it is one of kiln's files.
std::optional<CacheFileName> parse_cache_file_name(std::string_view name);

}  // namespace kiln::detail

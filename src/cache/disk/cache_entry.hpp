#pragma once
/// @file
/// The disk cache entry format: pure encode and decode over byte buffers, no I/O, so every rule
/// is unit-tested and the decoder can be fuzzed (libFuzzer: call decode_entry on the input).
///
/// Layout (all integers little-endian; version `cache_format_version`, now 3; the layout is the same
/// since version 1, the version also stands for the key encoding):
///
/// | offset | bytes  | field                                                                 |
/// | ------ | ------ | --------------------------------------------------------------------- |
/// | 0      | 8      | magic `KILNCACH`                                                      |
/// | 8      | 4      | u32 format version                                                    |
/// | 12     | 4      | u32 section count N (5 in version 1)                                  |
/// | 16     | 16     | key (CacheKey::bytes)                                                 |
/// | 32     | 16     | checksum: XXH3-128 (canonical) of bytes [48, end of file)             |
/// | 48     | 8      | u64 file size, the whole entry                                        |
/// | 56     | 16 × N | section table: u32 kind, u32 reserved (0), u64 size                   |
/// | ...    |        | the sections, back to back, in table order                            |
///
/// Sections in version 1, in this order: 1 `meta` (text lines `module=`, `target=`, `nvrtc=`,
/// `created=` ISO-8601 UTC, `compile_ms=`, for people and for the load-time name check),
/// 2 `options` (each option as u32 length + bytes), 3 `log`, 4 `ptx`, 5 `cubin`.
/// The checksum covers everything after itself; the fields before it are compared to exact
/// expected values, so any changed byte anywhere is caught.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache_key.hpp"
#include "jit/compiled_module.hpp"

namespace kiln {

inline constexpr std::size_t entry_header_bytes = 56;   ///< fixed part, before the section table
inline constexpr std::uint32_t entry_section_count = 5;  ///< sections in a version-1 entry

/// Encodes `module` under `key`. `nvrtc` ("13.0") and `created_unix_s` are only written for people.
/// Throws kiln::Error if the module or target name holds a newline or NUL (they could not be
/// told apart from the next meta line).
std::vector<std::uint8_t> encode_entry(const CacheKey& key, const CompiledModule& module,
                                       std::string_view nvrtc, std::int64_t created_unix_s);

/// Why an entry was refused.
enum class EntryFault {
  none,
  empty,         ///< zero bytes
  truncated,     ///< shorter than its header or its recorded size
  bad_magic,     ///< not a kiln entry
  bad_version,   ///< another format version
  wrong_key,     ///< a whole entry, but for another key
  bad_layout,    ///< size, section table or section contents inconsistent
  bad_checksum,  ///< bytes changed after writing
  bad_meta,      ///< meta section missing a field or malformed
};
std::string_view to_string(EntryFault fault);

/// A verified entry. The views point into the decoded buffer and live as long as it does.
struct EntryView {
  CacheKey key;
  std::string_view module;
  std::string_view target;
  std::string_view nvrtc;
  std::string_view created;
  double compile_ms = 0;
  std::vector<std::string> options;
  std::string_view log;
  std::string_view ptx;
  const std::uint8_t* cubin = nullptr;
  std::size_t cubin_size = 0;
};

struct EntryDecode {
  EntryFault fault = EntryFault::none;
  std::string detail;  ///< for people: what exactly was wrong; empty when `fault` is none
  EntryView entry;     ///< meaningful only when ok()
  bool ok() const noexcept { return fault == EntryFault::none; }
};

/// Checks, in this order: size, magic, version, key == `expected`, recorded size, section table,
/// checksum, section contents. Never reads outside [data, data + size); throws nothing but
/// std::bad_alloc, whatever the bytes.
EntryDecode decode_entry(const std::uint8_t* data, std::size_t size, const CacheKey& expected);

/// The module a verified entry holds, for `target` (the caller has checked the entry names it).
CompiledModule compiled_module_of(const EntryView& entry, const Target& target);

}  // namespace kiln

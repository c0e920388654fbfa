#pragma once
/// @file
/// The bundle file format (`kiln pack`): pure encode and decode over bytes, no I/O.
///
/// Layout (integers little-endian):
///
/// | offset | bytes | field                                                                    |
/// | ------ | ----- | ------------------------------------------------------------------------ |
/// | 0      | 8     | magic `KILNPACK`                                                         |
/// | 8      | 4     | u32 bundle version (1)                                                   |
/// | 12     | 4     | u32 flags: bit 0 = signed; any other bit set is refused                  |
/// | 16     | 8     | u64 file size                                                            |
/// | 24     | 16    | checksum: XXH3-128 (canonical) of bytes [72, end of file)                |
/// | 40     | 32    | HMAC-SHA256 of bytes [72, end) with the fleet key; zeros when unsigned   |
/// |        |       | (checked both ways: unsigned with a non-zero field, or signed with a zero |
/// |        |       | one, is refused)                                                         |
/// | 72     | 4     | u32 cache format version of the keys and entries (cache_format_version)  |
/// | 76     | 4     | u32 entry count N                                                        |
/// | 80     | 4     | u32 length B of the NVRTC build, then B bytes (nvrtc_build())            |
/// | ...    |       | index, N records sorted by key: 16 key, u64 offset, u64 size,            |
/// |        |       | u32 length + module name, u32 length + target name                       |
/// | ...    |       | the entries, back to back in index order, each in the disk cache's       |
/// |        |       | entry format (cache_entry.hpp) with its own checksum                     |
///
/// The whole-file checksum makes a truncated or changed bundle fail as a whole; each entry's own
/// checksum and key are checked again when it is used (a bad one is skipped and counted). Same
/// entries in, same bytes out: the index is sorted and entries carry no time.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/bundle/bundle_signature.hpp"
#include "cache/cache_key.hpp"

namespace kiln::bundle {

inline constexpr std::uint32_t bundle_version = 1;
inline constexpr std::size_t bundle_header_bytes = 72;  ///< before the checksummed part

/// One encoded entry to put in a bundle.
struct PackedEntry {
  CacheKey key;
  std::string module;
  std::string target;
  std::vector<std::uint8_t> bytes;  ///< encode_entry's output
};

/// Encodes a bundle of `entries` (any order; sorted here, a key given twice is an error) made by
/// the NVRTC `nvrtc_build`; signed when `key` is given. Throws kiln::Error on duplicate keys.
std::vector<std::uint8_t> encode_bundle(std::vector<PackedEntry> entries, std::string_view nvrtc_build,
                                        const SigningKey* key);

/// One index record of a decoded bundle; `offset`/`size` locate its entry in the file.
struct IndexRecord {
  CacheKey key;
  std::string module;
  std::string target;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

enum class SignatureState { unsigned_bundle, verified, not_checked };

/// A bundle whose header, checksum, signature (when a key is given) and index are good.
struct BundleIndex {
  std::uint32_t format_version = 0;  ///< the cache format of its keys
  std::string nvrtc_build;
  std::vector<IndexRecord> records;  ///< sorted by key
  SignatureState signature = SignatureState::unsigned_bundle;
};

struct BundleDecode {
  std::optional<BundleIndex> index;  ///< nothing when refused
  std::string error;                 ///< why refused: truncated, checksum, signature, layout, ...
};

/// Checks the whole file, every header byte included: magic, version, flags (unknown bits refused),
/// recorded size == `size` (else truncated or trailing bytes), checksum, the signature field's
/// agreement with the signed flag, then the signature: with `key`, an unsigned bundle or a wrong
/// signature is refused; without one, a signature is not checked (SignatureState::not_checked).
/// Then the index: every record inside the file, entries back to back up to the end. Never reads
/// outside [data, data + size).
BundleDecode decode_bundle(const std::uint8_t* data, std::size_t size, const SigningKey* key);

}  // namespace kiln::bundle

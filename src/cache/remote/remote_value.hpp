#pragma once
/// @file
/// What kiln stores under a Redis key: a small envelope around a disk-cache entry (cache_entry.hpp),
/// signed when the fleet shares a secret. Pure functions over bytes, unit-tested and fuzzable.
///
/// | offset | bytes | field                                                              |
/// | ------ | ----- | ------------------------------------------------------------------ |
/// | 0      | 8     | magic `KILNREM1`                                                   |
/// | 8      | 1     | 1: signed, 0: unsigned                                             |
/// | 9      | 32    | HMAC-SHA256(secret, "kiln remote entry v1" NUL redis key NUL entry), zeros if unsigned |
/// | 41     | ...   | the entry, exactly as the disk cache writes it                      |
///
/// The MAC covers the Redis key too, so a signed value copied under another key is refused even
/// before the entry's own key check.

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

inline constexpr std::size_t remote_value_header_bytes = 41;

/// Wraps `entry` for `redis_key`; signs it when `secret` is not empty (OpenSSL HMAC-SHA256).
std::string wrap_remote_value(std::string_view redis_key, std::string_view entry, std::string_view secret);

enum class RemoteValueFault {
  none,
  bad_envelope,       ///< too short or wrong magic: not written by kiln (or truncated below the header)
  missing_signature,  ///< unsigned, but this node requires signatures
  bad_signature,      ///< the MAC does not match (another secret, changed bytes, another key)
};
std::string_view to_string(RemoteValueFault fault);

struct RemoteValue {
  RemoteValueFault fault = RemoteValueFault::none;
  std::string_view entry;  ///< into the value; meaningful when fault is none
};

/// Opens a value read under `redis_key`. With a `secret`, only a value signed with it for that key
/// passes (compared in constant time); without one, any kiln envelope passes and the entry's own
/// checksum is the only check (done by the caller with decode_entry).
RemoteValue unwrap_remote_value(std::string_view redis_key, std::string_view value, std::string_view secret);

}  // namespace kiln

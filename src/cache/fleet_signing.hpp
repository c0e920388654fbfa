#pragma once
/// @file
/// Signing with the fleet's shared secret (`KILN_REMOTE_CACHE_KEY_FILE`): reading the key file and
/// HMAC-SHA256 from OpenSSL's libcrypto. The bundles and the remote (Redis) tier both sign with it,
/// so one key file means one key and one set of rules for both.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

inline constexpr const char* fleet_key_variable = "KILN_REMOTE_CACHE_KEY_FILE";

/// KILN_REMOTE_CACHE_KEY_FILE as set, an empty value included (read_fleet_key_file refuses it);
/// nothing when unset.
std::optional<std::string> fleet_key_setting();

/// The fleet's secret in `path`: a regular file owned by this effective user, mode 0600 or 0400 (no
/// group or other bits), 16 bytes to 1 MiB (one trailing newline is not part of the key). Throws
/// kiln::Error naming the file, the variable and what is wrong (an empty `path`: the variable is
/// set but empty).
std::string read_fleet_key_file(const std::string& path);

using Hmac = std::array<std::uint8_t, 32>;

/// HMAC-SHA256 under `key` of the parts one after the other, as if joined. Throws kiln::Error if
/// libcrypto fails.
Hmac hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts);

/// Whether the 32 bytes at `mac` are hmac_sha256(key, parts), compared in constant time.
bool hmac_sha256_matches(std::string_view key, std::initializer_list<std::string_view> parts, const void* mac);

}  // namespace kiln

#pragma once
/// @file
/// The optional bundle signature: HMAC-SHA256 with the fleet cache's key, the file named by
/// `KILN_REMOTE_CACHE_KEY_FILE` (read and signed by cache/fleet_signing.hpp, as the Redis tier does).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/fleet_signing.hpp"

namespace kiln::bundle {

using Signature = Hmac;

/// A secret key, as read from the key file.
struct SigningKey {
  std::vector<std::uint8_t> bytes;
  std::string file;  ///< where it came from, for messages
};

/// The key in `path`, by read_fleet_key_file's rules. Throws kiln::Error naming the file and what
/// is wrong.
SigningKey read_signing_key(const std::string& path);

/// `KILN_REMOTE_CACHE_KEY_FILE`'s key, or nothing when the variable is unset. Throws as
/// read_signing_key for a bad file: a configured key that cannot be used must not mean "unsigned".
std::optional<SigningKey> signing_key_from_env();

/// HMAC-SHA256 of [data, data + size) under `key`. Throws kiln::Error if libcrypto fails.
Signature sign(const SigningKey& key, const std::uint8_t* data, std::size_t size);

/// Whether `signature` is sign(key, data, size), compared in constant time.
bool signature_matches(const SigningKey& key, const std::uint8_t* data, std::size_t size, const Signature& signature);

}  // namespace kiln::bundle

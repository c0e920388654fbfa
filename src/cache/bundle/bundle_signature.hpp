#pragma once
/// @file
/// The optional bundle signature: HMAC-SHA256 (OpenSSL libcrypto) with the fleet cache's key, the
/// file named by `KILN_REMOTE_CACHE_KEY_FILE`. Small and self-contained on purpose: the Redis tier
/// (issue 18) reads the same key file with its own helper; the two are meant to merge into one.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::bundle {

using Signature = std::array<std::uint8_t, 32>;

/// A secret key, as read from the key file.
struct SigningKey {
  std::vector<std::uint8_t> bytes;
  std::string file;  ///< where it came from, for messages
};

/// The key in `path`: a regular file owned by this user with mode 0600 or stricter (no group or
/// other bits), at least 16 bytes (one trailing newline is not part of the key). Throws kiln::Error
/// naming the file and what is wrong.
SigningKey read_signing_key(const std::string& path);

/// `KILN_REMOTE_CACHE_KEY_FILE`'s key, or nothing when the variable is unset. Throws as
/// read_signing_key for a bad file: a configured key that cannot be used must not mean "unsigned".
std::optional<SigningKey> signing_key_from_env();

/// HMAC-SHA256 of [data, data + size) under `key`. Throws kiln::Error if libcrypto fails.
Signature sign(const SigningKey& key, const std::uint8_t* data, std::size_t size);

/// Whether `signature` is sign(key, data, size), compared in constant time.
bool signature_matches(const SigningKey& key, const std::uint8_t* data, std::size_t size, const Signature& signature);

}  // namespace kiln::bundle

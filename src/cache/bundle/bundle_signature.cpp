#include "cache/bundle/bundle_signature.hpp"

#include <string_view>

#include "cache/fleet_signing.hpp"

namespace kiln::bundle {

namespace {

std::string_view chars(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

std::string_view chars(const SigningKey& key) { return chars(key.bytes.data(), key.bytes.size()); }

}  // namespace

SigningKey read_signing_key(const std::string& path) {
  const std::string key = read_fleet_key_file(path);
  return {std::vector<std::uint8_t>(key.begin(), key.end()), path};
}

std::optional<SigningKey> signing_key_from_env() {
  // Why not env_value: a set but empty variable is a bad setting (read_fleet_key_file says so), not
  // "no key": treating it as unset would turn signature checks off silently.
  const auto path = fleet_key_setting();
  if (!path) return std::nullopt;
  return read_signing_key(*path);
}

Signature sign(const SigningKey& key, const std::uint8_t* data, std::size_t size) {
  return hmac_sha256(chars(key), {chars(data, size)});
}

bool signature_matches(const SigningKey& key, const std::uint8_t* data, std::size_t size, const Signature& signature) {
  return hmac_sha256_matches(chars(key), {chars(data, size)}, signature.data());
}

}  // namespace kiln::bundle

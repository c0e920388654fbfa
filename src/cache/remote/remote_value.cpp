// The remote value envelope: HMAC-SHA256 from OpenSSL's libcrypto, never hand-written.
#include "cache/remote/remote_value.hpp"

#include <array>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "kiln/error.hpp"

namespace kiln {

namespace {

constexpr std::string_view magic = "KILNREM1";
constexpr std::string_view domain("kiln remote entry v1\0", 21);
using Mac = std::array<unsigned char, 32>;

Mac mac_of(std::string_view secret, std::string_view redis_key, std::string_view entry) {
  std::string message;
  message.reserve(domain.size() + redis_key.size() + 1 + entry.size());
  message.append(domain).append(redis_key).append(1, '\0').append(entry);
  Mac mac{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(), &length) == nullptr ||
      length != mac.size())
    throw_error("HMAC-SHA256 failed in OpenSSL");
  return mac;
}

}  // namespace

std::string_view to_string(RemoteValueFault fault) {
  switch (fault) {
    case RemoteValueFault::none: return "ok";
    case RemoteValueFault::bad_envelope: return "not a kiln remote value (too short or wrong magic)";
    case RemoteValueFault::missing_signature: return "unsigned, and this node requires a signature";
    case RemoteValueFault::bad_signature: return "signature does not match (another key file, or changed bytes)";
  }
  return "unknown";
}

std::string wrap_remote_value(std::string_view redis_key, std::string_view entry, std::string_view secret) {
  std::string value;
  value.reserve(remote_value_header_bytes + entry.size());
  value.append(magic);
  value.append(1, secret.empty() ? '\0' : '\1');
  if (secret.empty()) {
    value.append(Mac{}.size(), '\0');
  } else {
    const Mac mac = mac_of(secret, redis_key, entry);
    value.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  }
  value.append(entry);
  return value;
}

RemoteValue unwrap_remote_value(std::string_view redis_key, std::string_view value, std::string_view secret) {
  if (value.size() < remote_value_header_bytes || value.substr(0, magic.size()) != magic ||
      (value[8] != '\0' && value[8] != '\1'))
    return {RemoteValueFault::bad_envelope, {}};
  const std::string_view entry = value.substr(remote_value_header_bytes);
  if (secret.empty()) return {RemoteValueFault::none, entry};
  if (value[8] != '\1') return {RemoteValueFault::missing_signature, {}};
  const Mac expected = mac_of(secret, redis_key, entry);
  if (CRYPTO_memcmp(expected.data(), value.data() + 9, expected.size()) != 0) return {RemoteValueFault::bad_signature, {}};
  return {RemoteValueFault::none, entry};
}

}  // namespace kiln

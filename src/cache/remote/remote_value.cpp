// The remote value envelope: signed with the fleet's key by cache/fleet_signing.hpp.
#include "cache/remote/remote_value.hpp"

#include "cache/fleet_signing.hpp"

namespace kiln {

namespace {

constexpr std::string_view magic = "KILNREM1";
constexpr std::string_view domain("kiln remote entry v1\0", 21);
constexpr std::string_view key_end("\0", 1);

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
    value.append(Hmac{}.size(), '\0');
  } else {
    const Hmac mac = hmac_sha256(secret, {domain, redis_key, key_end, entry});
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
  if (!hmac_sha256_matches(secret, {domain, redis_key, key_end, entry}, value.data() + 9))
    return {RemoteValueFault::bad_signature, {}};
  return {RemoteValueFault::none, entry};
}

}  // namespace kiln

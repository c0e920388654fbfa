// The remote value envelope: signed and unsigned round trips, and every way a value is refused
// (garbage, truncation, missing or wrong signature, another key, any changed byte).
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "cache/remote/remote_value.hpp"

using namespace kiln;

namespace {
const std::string key = "kiln:entry:per_token_group_quant_fp8.sm_90a.00112233445566778899aabbccddeeff.kiln";
const std::string entry = std::string("KILNCACH") + std::string(200, '\x5a') + std::string(1, '\0') + "tail";
const std::string secret = "fleet-secret-0123456789";
}  // namespace

TEST_CASE("unsigned values round-trip for a node without a key") {
  const auto value = wrap_remote_value(key, entry, "");
  CHECK(value.size() == remote_value_header_bytes + entry.size());
  const auto opened = unwrap_remote_value(key, value, "");
  REQUIRE(opened.fault == RemoteValueFault::none);
  CHECK(opened.entry == entry);
}

TEST_CASE("a keyed node loads only values signed with its secret for that key") {
  const auto value = wrap_remote_value(key, entry, secret);
  const auto opened = unwrap_remote_value(key, value, secret);
  REQUIRE(opened.fault == RemoteValueFault::none);
  CHECK(opened.entry == entry);
  // A node without a key still reads a signed value (it checks the entry's checksum itself).
  CHECK(unwrap_remote_value(key, value, "").fault == RemoteValueFault::none);

  CHECK(unwrap_remote_value(key, wrap_remote_value(key, entry, ""), secret).fault ==
        RemoteValueFault::missing_signature);
  CHECK(unwrap_remote_value(key, value, "another-secret-0123456").fault == RemoteValueFault::bad_signature);
  CHECK(unwrap_remote_value(key + "x", value, secret).fault == RemoteValueFault::bad_signature);
  for (std::size_t i = 9; i < value.size(); i += 7) {
    std::string changed = value;
    changed[i] = static_cast<char>(changed[i] ^ 1);
    INFO(i);
    CHECK(unwrap_remote_value(key, changed, secret).fault == RemoteValueFault::bad_signature);
  }
  std::string unsigned_flag = value;
  unsigned_flag[8] = '\0';
  CHECK(unwrap_remote_value(key, unsigned_flag, secret).fault == RemoteValueFault::missing_signature);
}

TEST_CASE("the signature is HMAC-SHA256 over the domain, the Redis key, a NUL and the entry") {
  // Why pinned bytes: nodes of different kiln versions share one Redis and must verify each
  // other's values (the expected MAC is Python's hmac over the same message).
  const auto value = wrap_remote_value(key, entry, secret);
  std::string hex;
  for (std::size_t i = 9; i < remote_value_header_bytes; ++i) {
    char byte[3];
    std::snprintf(byte, sizeof byte, "%02x", static_cast<unsigned char>(value[i]));
    hex += byte;
  }
  CHECK(hex == "df4d64dd404f605257efe281e622c135dd8c0f59c0e14c04bc240b37ca9d1b6f");
}

TEST_CASE("values that are not kiln envelopes are refused whatever the key") {
  for (const std::string& bad : {std::string(), std::string("KILNREM1"), std::string(40, 'x'),
                                 std::string("KILNREM2") + std::string(40, '\0'),
                                 std::string("KILNREM1\x07") + std::string(40, '\0')}) {
    CHECK(unwrap_remote_value(key, bad, "").fault == RemoteValueFault::bad_envelope);
    CHECK(unwrap_remote_value(key, bad, secret).fault == RemoteValueFault::bad_envelope);
  }
}

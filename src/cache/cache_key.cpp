#include "cache/cache_key.hpp"

#include <algorithm>
#include <memory>

#include <xxhash.h>

#include "kiln/error.hpp"

namespace kiln {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

/// Little-endian fixed-width integers and length-prefixed bytes into one XXH3 stream.
class KeyHasher {
 public:
  KeyHasher() : state_(XXH3_createState(), &XXH3_freeState) {
    if (!state_ || XXH3_128bits_reset(state_.get()) != XXH_OK) throw_error("XXH3_128bits_reset failed");
  }

  void u64(std::uint64_t value) {
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
    raw(bytes, sizeof bytes);
  }

  void text(std::string_view bytes) {
    u64(bytes.size());
    raw(bytes.data(), bytes.size());
  }

  CacheKey digest() const {
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state_.get()));
    CacheKey key;
    std::copy(std::begin(canonical.digest), std::end(canonical.digest), key.bytes.begin());
    return key;
  }

 private:
  void raw(const void* data, std::size_t size) {
    if (XXH3_128bits_update(state_.get(), data, size) != XXH_OK) throw_error("XXH3_128bits_update failed");
  }

  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state_;
};

}  // namespace

std::string CacheKey::hex() const {
  std::string out(bytes.size() * 2, '0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = hex_digits[bytes[i] >> 4];
    out[2 * i + 1] = hex_digits[bytes[i] & 0xf];
  }
  return out;
}

std::optional<CacheKey> parse_cache_key(std::string_view hex) {
  CacheKey key;
  if (hex.size() != key.bytes.size() * 2) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < key.bytes.size(); ++i) {
    const int high = nibble(hex[2 * i]);
    const int low = nibble(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    key.bytes[i] = static_cast<std::uint8_t>(high << 4 | low);
  }
  return key;
}

CacheKey make_cache_key(const CacheKeyInputs& inputs) {
  std::vector<const KernelHeader*> headers;
  headers.reserve(inputs.headers.size());
  for (const auto& header : inputs.headers) headers.push_back(&header);
  std::sort(headers.begin(), headers.end(), [](const KernelHeader* a, const KernelHeader* b) {
    return a->name != b->name ? a->name < b->name : a->text < b->text;
  });

  KeyHasher hash;
  hash.text("kiln cache key");
  hash.u64(inputs.format_version);
  hash.text(inputs.nvrtc_build);
  hash.text(inputs.target);
  // Why: a fixed number, not to_string(kind), so renaming the enum's spelling cannot move keys.
  hash.u64(inputs.kind == OutputKind::cubin ? 1 : 2);
  hash.u64(inputs.options.size());
  for (const auto& option : inputs.options) hash.text(option);
  hash.text(inputs.module);
  hash.text(inputs.source);
  hash.u64(headers.size());
  for (const auto* header : headers) {
    hash.text(header->name);
    hash.text(header->text);
  }
  return hash.digest();
}

}  // namespace kiln

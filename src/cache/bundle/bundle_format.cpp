#include "cache/bundle/bundle_format.hpp"

#include <algorithm>
#include <cstring>

#include <xxhash.h>

#include "kiln/error.hpp"

namespace kiln::bundle {

namespace {

constexpr char magic[8] = {'K', 'I', 'L', 'N', 'P', 'A', 'C', 'K'};
constexpr std::size_t checksum_at = 24, signature_at = 40, body_at = bundle_header_bytes;
constexpr std::uint32_t flag_signed = 1;

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}
void put_u64(std::vector<std::uint8_t>& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}
void put_text(std::vector<std::uint8_t>& out, std::string_view text) {
  put_u32(out, static_cast<std::uint32_t>(text.size()));
  out.insert(out.end(), text.begin(), text.end());
}
void set_u64(std::vector<std::uint8_t>& out, std::size_t at, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::array<std::uint8_t, 16> checksum_of(const std::uint8_t* data, std::size_t size) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(data, size));
  std::array<std::uint8_t, 16> out{};
  std::memcpy(out.data(), canonical.digest, out.size());
  return out;
}

/// Bounded little-endian reads over the file; any read past the end sets `failed`.
struct Reader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  bool failed = false;

  bool has(std::size_t n) {
    if (failed || n > size - at) failed = true;
    return !failed;
  }
  std::uint64_t uint(int bytes) {
    if (!has(static_cast<std::size_t>(bytes))) return 0;
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value |= std::uint64_t{data[at + i]} << (8 * i);
    at += static_cast<std::size_t>(bytes);
    return value;
  }
  std::string text(std::size_t max) {
    const auto length = static_cast<std::size_t>(uint(4));
    if (length > max || !has(length)) {
      failed = true;
      return {};
    }
    std::string out(reinterpret_cast<const char*>(data + at), length);
    at += length;
    return out;
  }
};

BundleDecode refused(std::string why) { return {std::nullopt, std::move(why)}; }

std::string hex32(std::uint32_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string out(8, '0');
  for (int i = 7; i >= 0; --i, value >>= 4) out[static_cast<std::size_t>(i)] = digits[value & 15];
  return out;
}

}  // namespace

std::vector<std::uint8_t> encode_bundle(std::vector<PackedEntry> entries, std::string_view nvrtc_build,
                                        const SigningKey* key) {
  std::sort(entries.begin(), entries.end(),
            [](const PackedEntry& a, const PackedEntry& b) { return a.key.bytes < b.key.bytes; });
  for (std::size_t i = 1; i < entries.size(); ++i)
    if (entries[i].key == entries[i - 1].key)
      throw_error("bundle: key " + entries[i].key.hex() + " given twice (" + entries[i].module + " for " +
                  entries[i].target + ")");
  std::vector<std::uint8_t> out(magic, magic + sizeof magic);
  put_u32(out, bundle_version);
  put_u32(out, key != nullptr ? flag_signed : 0);
  out.resize(body_at, 0);  // size, checksum and signature are filled in last
  put_u32(out, cache_format_version);
  put_u32(out, static_cast<std::uint32_t>(entries.size()));
  put_text(out, nvrtc_build);
  std::size_t index_size = 0;
  for (const auto& entry : entries) index_size += 16 + 8 + 8 + 4 + entry.module.size() + 4 + entry.target.size();
  std::uint64_t offset = out.size() + index_size;
  for (const auto& entry : entries) {
    out.insert(out.end(), entry.key.bytes.begin(), entry.key.bytes.end());
    put_u64(out, offset);
    put_u64(out, entry.bytes.size());
    put_text(out, entry.module);
    put_text(out, entry.target);
    offset += entry.bytes.size();
  }
  for (const auto& entry : entries) out.insert(out.end(), entry.bytes.begin(), entry.bytes.end());
  set_u64(out, 16, out.size());
  const auto sum = checksum_of(out.data() + body_at, out.size() - body_at);
  std::copy(sum.begin(), sum.end(), out.begin() + checksum_at);
  if (key != nullptr) {
    const Signature signature = sign(*key, out.data() + body_at, out.size() - body_at);
    std::copy(signature.begin(), signature.end(), out.begin() + signature_at);
  }
  return out;
}

BundleDecode decode_bundle(const std::uint8_t* data, std::size_t size, const SigningKey* key) {
  if (size < body_at + 12)
    return refused("truncated: " + std::to_string(size) + " bytes, shorter than a bundle header");
  if (std::memcmp(data, magic, sizeof magic) != 0) return refused("not a kiln bundle (no KILNPACK magic)");
  Reader header{data, size, 8};
  const auto version = header.uint(4);
  if (version != bundle_version)
    return refused("bundle version " + std::to_string(version) + ", this kiln reads version " +
                   std::to_string(bundle_version));
  const auto flags = header.uint(4);
  // Why every header byte is checked: the checksum and signature cover only [72, end), so a flag
  // or signature byte nobody reads could be changed unnoticed.
  if ((flags & ~std::uint64_t{flag_signed}) != 0)
    return refused("unknown flags 0x" + hex32(static_cast<std::uint32_t>(flags)) +
                   " (this kiln knows only bit 0, signed): written by another kiln, or changed");
  const auto recorded = header.uint(8);
  if (recorded > size)
    return refused("truncated: " + std::to_string(size) + " bytes, the header says " + std::to_string(recorded));
  if (recorded < size)
    return refused(std::to_string(size - recorded) + " bytes after the end the header records (" +
                   std::to_string(recorded) + ")");
  if (checksum_of(data + body_at, size - body_at) != [&] {
        std::array<std::uint8_t, 16> stored{};
        std::memcpy(stored.data(), data + checksum_at, stored.size());
        return stored;
      }())
    return refused("checksum mismatch: the bundle was changed or damaged after it was written");
  BundleIndex index;
  Signature stored{};
  std::memcpy(stored.data(), data + signature_at, stored.size());
  const bool zero_signature = std::all_of(stored.begin(), stored.end(), [](std::uint8_t b) { return b == 0; });
  if ((flags & flag_signed) == 0 && !zero_signature)
    return refused("unsigned, but its signature field is not all zeros: changed after it was written");
  // Why: an HMAC-SHA256 of all zeros does not occur; a signed flag over a zero field is a flipped bit.
  if ((flags & flag_signed) != 0 && zero_signature)
    return refused("marked signed, but its signature field is all zeros: changed after it was written");
  if (key != nullptr) {
    if ((flags & flag_signed) == 0)
      return refused("unsigned, and a signing key is configured (" + key->file + "): only signed bundles are used");
    if (!signature_matches(*key, data + body_at, size - body_at, stored))
      return refused("signature does not match the key in " + key->file);
    index.signature = SignatureState::verified;
  } else {
    index.signature = (flags & flag_signed) != 0 ? SignatureState::not_checked : SignatureState::unsigned_bundle;
  }

  Reader in{data, size, body_at};
  index.format_version = static_cast<std::uint32_t>(in.uint(4));
  if (index.format_version != cache_format_version)
    return refused("entries in cache format " + std::to_string(index.format_version) + ", this kiln uses " +
                   std::to_string(cache_format_version) + " (pack it again with this kiln)");
  const auto count = in.uint(4);
  index.nvrtc_build = in.text(4096);
  // Why the bound: each record takes at least 40 bytes, so a count larger than the file is a lie.
  if (in.failed || count > size / 40) return refused("bad layout: header or entry count");
  std::uint64_t expected_offset = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    IndexRecord record;
    if (!in.has(16)) break;
    std::memcpy(record.key.bytes.data(), data + in.at, 16);
    in.at += 16;
    record.offset = in.uint(8);
    record.size = in.uint(8);
    record.module = in.text(4096);
    record.target = in.text(256);
    if (in.failed) break;
    if (i > 0 && !(index.records.back().key.bytes < record.key.bytes))
      return refused("bad layout: index not sorted by key at record " + std::to_string(i));
    if (i > 0 && record.offset != expected_offset)
      return refused("bad layout: entry " + std::to_string(i) + " does not follow the one before");
    if (record.offset > size || record.size > size - record.offset)
      return refused("bad layout: entry " + std::to_string(i) + " lies outside the file");
    expected_offset = record.offset + record.size;
    index.records.push_back(std::move(record));
  }
  if (in.failed) return refused("bad layout: the index runs past the end of the file");
  if (!index.records.empty() && (index.records.front().offset != in.at || expected_offset != size))
    return refused("bad layout: entries do not fill the file after the index");
  if (index.records.empty() && in.at != size) return refused("bad layout: bytes after an empty index");
  return {std::move(index), {}};
}

}  // namespace kiln::bundle

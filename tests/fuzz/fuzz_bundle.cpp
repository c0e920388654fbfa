// Fuzz target: the bundle decoder, the reader of a file that a deployment image ships
// (KILN_CACHE_PATH, `kiln pack --list/--verify`) and that anyone able to write the image could
// have changed. The first input byte picks how far the rest may get:
//   0: decoded as it is, without a key and with one;
//   1: with its size field, checksum and (when its flag says signed) signature made right, so the
//      decoder reaches the index;
//   2: read as entries to pack (each a length byte and that many bytes): encode_bundle, then
//      decode_bundle must give every record back, and refuse the file with any one byte changed;
//      with bit 1 of the next byte set, the same entries with one key given twice must be refused.
// Invariants: no read outside the input (ASan); an accepted index's records are sorted by key and
// lie back to back inside the file up to its end; an accepted bundle re-encodes to the same bytes
// from the header on; every accepted record's entry goes through decode_entry without harm.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cache/bundle/bundle_format.hpp"
#include "cache/disk/cache_entry.hpp"
#include "kiln/error.hpp"

namespace {

using namespace kiln;
using namespace kiln::bundle;

void require(bool condition) {
  if (!condition) std::abort();
}

const SigningKey signing_key{std::vector<std::uint8_t>(32, 0x5a), "fuzz-key"};
constexpr std::size_t flags_at = 12, checksum_at = 24, signature_at = 40;

void put_u64(std::vector<std::uint8_t>& bytes, std::size_t at, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
}

// What decode_bundle reads past the header made to agree with the bytes: size, signature, checksum.
void make_header_agree(std::vector<std::uint8_t>& bytes) {
  if (bytes.size() < bundle_header_bytes) return;
  put_u64(bytes, 16, bytes.size());
  const std::uint8_t* body = bytes.data() + bundle_header_bytes;
  const std::size_t body_size = bytes.size() - bundle_header_bytes;
  if (bytes[flags_at] & 1) {
    const Signature signature = sign(signing_key, body, body_size);
    std::memcpy(bytes.data() + signature_at, signature.data(), signature.size());
  }
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(body, body_size));
  std::memcpy(bytes.data() + checksum_at, canonical.digest, 16);
}

// The invariants of an accepted bundle (see the top of the file).
void check_accepted(const std::uint8_t* data, std::size_t size, const BundleIndex& index) {
  std::vector<PackedEntry> entries;
  std::uint64_t next = 0;
  for (std::size_t i = 0; i < index.records.size(); ++i) {
    const IndexRecord& record = index.records[i];
    require(record.offset <= size && record.size <= size - record.offset);
    if (i > 0) require(index.records[i - 1].key.bytes < record.key.bytes && record.offset == next);
    next = record.offset + record.size;
    decode_entry(data + record.offset, static_cast<std::size_t>(record.size), record.key);
    entries.push_back({record.key, record.module, record.target,
                       std::vector<std::uint8_t>(data + record.offset, data + record.offset + record.size)});
  }
  if (!index.records.empty()) require(next == size);
  const std::vector<std::uint8_t> again = encode_bundle(std::move(entries), index.nvrtc_build, nullptr);
  require(again.size() == size);
  require(std::memcmp(again.data() + bundle_header_bytes, data + bundle_header_bytes, size - bundle_header_bytes) == 0);
}

void decode_both_ways(const std::uint8_t* data, std::size_t size) {
  for (const SigningKey* key : {static_cast<const SigningKey*>(nullptr), &signing_key}) {
    const BundleDecode decoded = decode_bundle(data, size, key);
    require(decoded.index.has_value() == decoded.error.empty());
    if (decoded.index) check_accepted(data, size, *decoded.index);
  }
}

// Mode 2: entries from the input, packed, decoded, then each byte position the input names changed.
void round_trip(const std::uint8_t* data, std::size_t size) {
  std::vector<PackedEntry> entries;
  std::size_t at = 0;
  while (at < size && entries.size() < 8) {
    const std::size_t length = std::min<std::size_t>(data[at], size - at - 1);
    PackedEntry entry;
    entry.bytes.assign(data + at + 1, data + at + 1 + length);
    const XXH128_hash_t hash = XXH3_128bits(entry.bytes.data(), entry.bytes.size());
    std::memcpy(entry.key.bytes.data(), &hash, sizeof hash);
    // Why the entry's number in the last byte: encode_bundle refuses a key given twice, and a hash
    // does not promise distinct keys (with per-entry seeds XXH3 gave two 16-byte entries one key,
    // corpus/bundle/keys_xxh3_seed_collision).
    entry.key.bytes.back() = static_cast<std::uint8_t>(entries.size());
    entry.module = "m" + std::to_string(entries.size());
    entry.target = "sm_90a";
    entries.push_back(std::move(entry));
    at += 1 + length;
  }
  const bool signed_bundle = size > 0 && (data[0] & 1);
  if (entries.size() >= 2 && (data[0] & 2)) {
    // A key given twice is refused, never packed: a loader could serve either entry.
    std::vector<PackedEntry> twice = entries;
    twice.back().key = twice.front().key;
    bool refused = false;
    try {
      encode_bundle(std::move(twice), "build-id fuzz", nullptr);
    } catch (const Error&) {
      refused = true;
    }
    require(refused);
  }
  const std::vector<PackedEntry> packed = entries;
  std::vector<std::uint8_t> bytes = encode_bundle(entries, "build-id fuzz", signed_bundle ? &signing_key : nullptr);
  const BundleDecode decoded = decode_bundle(bytes.data(), bytes.size(), signed_bundle ? &signing_key : nullptr);
  require(decoded.index.has_value());
  require(decoded.index->records.size() == packed.size());
  require(decoded.index->nvrtc_build == "build-id fuzz");
  for (const PackedEntry& entry : packed) {
    bool found = false;
    for (const IndexRecord& record : decoded.index->records)
      if (record.key == entry.key)
        found = record.module == entry.module && record.target == entry.target && record.size == entry.bytes.size() &&
                std::equal(entry.bytes.begin(), entry.bytes.end(), bytes.begin() + record.offset);
    require(found);
  }
  check_accepted(bytes.data(), bytes.size(), *decoded.index);
  // Why not the flags (bytes 12-15): an unknown bit is ignored, and the signed bit on a bundle read
  // without a key only says its signature is not checked. Nor, unsigned, the signature's 32 bytes.
  const std::size_t position = size == 0 ? 0 : (std::size_t{data[size - 1]} * 131 + size) % bytes.size();
  if (position >= flags_at && position < flags_at + 4) return;
  if (!signed_bundle && position >= signature_at && position < bundle_header_bytes) return;
  bytes[position] ^= 0x01;
  require(!decode_bundle(bytes.data(), bytes.size(), signed_bundle ? &signing_key : nullptr).index.has_value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0] % 3;
  const std::uint8_t* rest = data + 1;
  const std::size_t rest_size = size - 1;
  if (mode == 0) {
    decode_both_ways(rest, rest_size);
  } else if (mode == 1) {
    std::vector<std::uint8_t> bytes(rest, rest + rest_size);
    make_header_agree(bytes);
    decode_both_ways(bytes.data(), bytes.size());
  } else {
    round_trip(rest, rest_size);
  }
  return 0;
}

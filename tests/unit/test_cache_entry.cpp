#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <set>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cache/disk/cache_entry.hpp"
#include "kiln/error.hpp"

using namespace kiln;

namespace {

CacheKey key_of(std::uint8_t fill) {
  CacheKey key;
  for (std::size_t i = 0; i < key.bytes.size(); ++i) key.bytes[i] = static_cast<std::uint8_t>(fill + i);
  return key;
}

CompiledModule sample_module() {
  CompiledModule module;
  module.module = "per_token_group_quant_fp8";
  module.target = Target{{9, 0}, true, OutputKind::cubin};
  module.options = {"--std=c++17", "-arch=sm_90a", ""};
  module.ptx = ".version 9.0\n.target sm_90a\n";
  module.cubin = {0x7f, 'E', 'L', 'F', 0, 1, 2, 3, 0xff};
  module.log = "warning: something\n";
  module.compile_ms = 123.456;
  return module;
}

std::uint32_t u32_at(const std::vector<std::uint8_t>& bytes, std::size_t at) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = value << 8 | bytes[at + i];
  return value;
}
std::uint64_t u64_at(const std::vector<std::uint8_t>& bytes, std::size_t at) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | bytes[at + i];
  return value;
}
void put_u64_at(std::vector<std::uint8_t>& bytes, std::size_t at, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
}

/// Recomputes the checksum, so a test can reach the checks that come after it.
void reseal(std::vector<std::uint8_t>& bytes) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(bytes.data() + 48, bytes.size() - 48));
  std::memcpy(bytes.data() + 32, canonical.digest, 16);
}

EntryFault fault_of(const std::vector<std::uint8_t>& bytes, const CacheKey& key) {
  return decode_entry(bytes.data(), bytes.size(), key).fault;
}

constexpr std::size_t table = entry_header_bytes;                       // section table offset
constexpr std::size_t sections = entry_header_bytes + 16 * entry_section_count;  // first section

}  // namespace

TEST_CASE("entry round-trips every field of the compiled module") {
  const auto key = key_of(1);
  const auto module = sample_module();
  const auto bytes = encode_entry(key, module, "13.0", 1700000000);
  const auto decoded = decode_entry(bytes.data(), bytes.size(), key);
  REQUIRE(decoded.ok());
  CHECK(decoded.detail.empty());
  const auto& entry = decoded.entry;
  CHECK(entry.key == key);
  CHECK(entry.module == module.module);
  CHECK(entry.target == "sm_90a");
  CHECK(entry.nvrtc == "13.0");
  CHECK(entry.created == "2023-11-14T22:13:20Z");
  CHECK(entry.compile_ms == module.compile_ms);
  CHECK(entry.options == module.options);
  CHECK(entry.log == module.log);
  CHECK(entry.ptx == module.ptx);
  CHECK(std::vector<std::uint8_t>(entry.cubin, entry.cubin + entry.cubin_size) == module.cubin);
}

TEST_CASE("entry with empty sections (a PTX module, no options, no log) round-trips") {
  auto module = sample_module();
  module.target = Target{{12, 0}, false, OutputKind::ptx};
  module.cubin.clear();
  module.options.clear();
  module.log.clear();
  const auto bytes = encode_entry(key_of(2), module, "13.0", 0);
  const auto decoded = decode_entry(bytes.data(), bytes.size(), key_of(2));
  REQUIRE(decoded.ok());
  CHECK(decoded.entry.target == "compute_120");
  CHECK(decoded.entry.cubin_size == 0);
  CHECK(decoded.entry.options.empty());
  CHECK(decoded.entry.log.empty());
  CHECK(decoded.entry.ptx == module.ptx);
}

TEST_CASE("entry header layout is as documented") {
  const auto key = key_of(3);
  const auto module = sample_module();
  const auto bytes = encode_entry(key, module, "13.0", 0);
  CHECK(std::string(bytes.begin(), bytes.begin() + 8) == "KILNCACH");
  CHECK(u32_at(bytes, 8) == cache_format_version);
  CHECK(u32_at(bytes, 12) == entry_section_count);
  CHECK(std::equal(key.bytes.begin(), key.bytes.end(), bytes.begin() + 16));
  CHECK(u64_at(bytes, 48) == bytes.size());
  std::uint64_t total = sections;
  for (std::uint32_t i = 0; i < entry_section_count; ++i) {
    CHECK(u32_at(bytes, table + 16 * i) == i + 1);
    CHECK(u32_at(bytes, table + 16 * i + 4) == 0);
    total += u64_at(bytes, table + 16 * i + 8);
  }
  CHECK(total == bytes.size());
  CHECK(u64_at(bytes, table + 16 * 3 + 8) == module.ptx.size());
  CHECK(u64_at(bytes, table + 16 * 4 + 8) == module.cubin.size());
  // The meta section comes first and is plain text, so `head -c 400 entry` shows it.
  const std::string meta(bytes.begin() + sections, bytes.begin() + sections + u64_at(bytes, table + 8));
  CHECK(meta.rfind("module=per_token_group_quant_fp8\ntarget=sm_90a\nnvrtc=13.0\ncreated=1970-01-01T00:00:00Z\n", 0) == 0);
}

TEST_CASE("entry decode rejects an empty buffer and every truncation") {
  const auto key = key_of(4);
  const auto bytes = encode_entry(key, sample_module(), "13.0", 0);
  CHECK(decode_entry(nullptr, 0, key).fault == EntryFault::empty);
  CHECK(decode_entry(bytes.data(), 0, key).fault == EntryFault::empty);
  for (std::size_t size = 1; size < bytes.size(); ++size) {
    CAPTURE(size);
    const auto decoded = decode_entry(bytes.data(), size, key);
    CHECK(decoded.fault == EntryFault::truncated);
    CHECK_FALSE(decoded.detail.empty());
  }
}

TEST_CASE("entry decode rejects every single changed byte") {
  const auto key = key_of(5);
  const auto good = encode_entry(key, sample_module(), "13.0", 0);
  for (std::size_t at = 0; at < good.size(); ++at) {
    for (std::uint8_t flip : {std::uint8_t{0x01}, std::uint8_t{0x80}}) {
      auto bytes = good;
      bytes[at] ^= flip;
      CAPTURE(at, int(flip));
      const auto fault = fault_of(bytes, key);
      CHECK(fault != EntryFault::none);
      if (at < 8) CHECK(fault == EntryFault::bad_magic);
      if (at >= 8 && at < 12) CHECK(fault == EntryFault::bad_version);
      if (at >= 16 && at < 32) CHECK(fault == EntryFault::wrong_key);
      if (at >= sections) CHECK(fault == EntryFault::bad_checksum);
    }
  }
}

TEST_CASE("entry decode rejects a whole entry for another key, and trailing bytes") {
  const auto bytes = encode_entry(key_of(6), sample_module(), "13.0", 0);
  CHECK(fault_of(bytes, key_of(7)) == EntryFault::wrong_key);
  auto longer = bytes;
  longer.push_back(0);
  CHECK(fault_of(longer, key_of(6)) == EntryFault::bad_layout);
}

TEST_CASE("entry decode rejects garbage of any size without reading past the buffer") {
  std::mt19937 random(42);
  const auto key = key_of(8);
  const auto good = encode_entry(key, sample_module(), "13.0", 0);
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::uint8_t> bytes(random() % 600);
    for (auto& byte : bytes) byte = static_cast<std::uint8_t>(random());
    // Half the rounds keep a valid prefix, so the later checks see garbage too.
    if (round % 2 == 1) std::copy_n(good.begin(), std::min<std::size_t>(bytes.size(), 56 + random() % 100), bytes.begin());
    CAPTURE(round, bytes.size());
    CHECK_FALSE(decode_entry(bytes.data(), bytes.size(), key).ok());
  }
}

TEST_CASE("entry decode rejects inconsistent layouts even with a matching checksum") {
  const auto key = key_of(9);
  const auto good = encode_entry(key, sample_module(), "13.0", 0);
  auto resealed = [&](auto change) {
    auto bytes = good;
    change(bytes);
    reseal(bytes);
    return fault_of(bytes, key);
  };
  CHECK(resealed([](auto&) {}) == EntryFault::none);
  CHECK(resealed([](auto& b) { put_u64_at(b, table + 16 * 3 + 8, ~std::uint64_t{0}); }) == EntryFault::bad_layout);
  CHECK(resealed([](auto& b) { put_u64_at(b, table + 16 * 3 + 8, u64_at(b, table + 16 * 3 + 8) + 1); }) ==
        EntryFault::bad_layout);
  CHECK(resealed([](auto& b) { std::swap(b[table + 16 * 3], b[table + 16 * 4]); }) == EntryFault::bad_layout);
  CHECK(resealed([](auto& b) { b[table + 4] = 1; }) == EntryFault::bad_layout);
  CHECK(resealed([](auto& b) { b[12] = 4; }) == EntryFault::bad_layout);
  // Meta: "module=" becomes "modula=", an unknown field.
  CHECK(resealed([](auto& b) { b[sections + 5] = 'a'; }) == EntryFault::bad_meta);
  // Meta: the first newline becomes a space, so "target" is missing.
  CHECK(resealed([](auto& b) { b[sections + std::string("module=per_token_group_quant_fp8").size()] = ' '; }) ==
        EntryFault::bad_meta);
  // Options: the first option's length overruns its section.
  const std::size_t options_at = sections + u64_at(good, table + 8);
  CHECK(resealed([&](auto& b) { b[options_at + 3] = 0x7f; }) == EntryFault::bad_layout);
}

TEST_CASE("entry encode refuses names that would break the meta lines") {
  auto module = sample_module();
  module.module = "bad\nname";
  CHECK_THROWS_AS(encode_entry(key_of(10), module, "13.0", 0), Error);
  CHECK_THROWS_AS(encode_entry(key_of(10), sample_module(), "13\n0", 0), Error);
}

TEST_CASE("entry fault names are distinct") {
  std::set<std::string_view> names;
  for (auto fault : {EntryFault::none, EntryFault::empty, EntryFault::truncated, EntryFault::bad_magic,
                     EntryFault::bad_version, EntryFault::wrong_key, EntryFault::bad_layout, EntryFault::bad_checksum,
                     EntryFault::bad_meta})
    CHECK(names.insert(to_string(fault)).second);
}

// Bundles (src/cache/bundle/): the format's determinism and every refusal (truncated, changed,
// trailing bytes, unsigned or badly signed with a key, a key file others can read), a bad entry
// skipped and counted while the rest is used, a bundle of another NVRTC build refused by key, the
// layered provider with KILN_JIT=off, and a read-only folder layer that is read and never written.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cache/bundle/bundle_file.hpp"
#include "cache/bundle/bundle_format.hpp"
#include "cache/cache_path.hpp"
#include "cache/disk/cache_entry.hpp"
#include "cache/disk/read_only_folder.hpp"
#include "runtime/module_provider.hpp"
#include "cache_test_support.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "kiln/error.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

bundle::PackedEntry packed(const std::string& module, const Target& target, std::string_view build, std::size_t bytes = 500) {
  CompiledModule compiled = module_for(module, target, bytes);
  compiled.compile_ms = 0;
  bundle::PackedEntry entry;
  CacheKeyInputs inputs;
  inputs.nvrtc_build = build;
  const std::string name = target.name();
  inputs.target = name;
  inputs.module = module;
  entry.key = make_cache_key(inputs);
  entry.module = module;
  entry.target = name;
  entry.bytes = encode_entry(entry.key, compiled, build, 0);
  return entry;
}

void write(const std::string& path, const std::vector<std::uint8_t>& bytes, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ::chmod(path.c_str(), mode);
}

bundle::SigningKey test_key(const std::string& text = "0123456789abcdef0123") {
  return {std::vector<std::uint8_t>(text.begin(), text.end()), "test-key"};
}

/// The real modules of this build, compiled for sm_90a, keyed by `build`.
std::vector<bundle::PackedEntry> real_entries(std::string_view build) {
  const Compiler compiler(false);
  const Target target{{9, 0}, true, OutputKind::cubin};
  std::vector<bundle::PackedEntry> out;
  for (const auto& source : embedded_modules()) {
    CompiledModule module = compiler.compile(source, target);
    module.compile_ms = 0;
    bundle::PackedEntry entry;
    entry.key = module_cache_key(source, target, compiler.options(target), build);
    entry.module = source.module;
    entry.target = target.name();
    entry.bytes = encode_entry(entry.key, module, build, 0);
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

TEST_CASE("bundle: the same entries in any order give the same bytes, and decode back") {
  const auto a = packed("m1", sm90a(), "build-id x");
  const auto b = packed("m2", sm80(), "build-id x", 900);
  const auto one = bundle::encode_bundle({a, b}, "build-id x", nullptr);
  const auto two = bundle::encode_bundle({b, a}, "build-id x", nullptr);
  CHECK(one == two);
  const auto decoded = bundle::decode_bundle(one.data(), one.size(), nullptr);
  REQUIRE(decoded.index);
  CHECK(decoded.index->nvrtc_build == "build-id x");
  CHECK(decoded.index->records.size() == 2);
  CHECK(decoded.index->signature == bundle::SignatureState::unsigned_bundle);
  CHECK_THROWS_WITH(bundle::encode_bundle({a, a}, "build-id x", nullptr), Catch::Contains("given twice"));
}

TEST_CASE("bundle: truncated, changed, or longer than recorded is refused as a whole, naming why") {
  const auto bytes = bundle::encode_bundle({packed("m1", sm90a(), "b"), packed("m2", sm90a(), "b")}, "b", nullptr);
  for (std::size_t cut : {std::size_t{0}, std::size_t{10}, std::size_t{80}, bytes.size() / 2, bytes.size() - 1}) {
    CAPTURE(cut);
    const auto decoded = bundle::decode_bundle(bytes.data(), cut, nullptr);
    CHECK_FALSE(decoded.index);
    CHECK_THAT(decoded.error, Catch::Contains("truncated"));
  }
  for (std::size_t at : {std::size_t{30}, std::size_t{75}, std::size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    CAPTURE(at);
    auto changed = bytes;
    changed[at] ^= 0x01;
    const auto decoded = bundle::decode_bundle(changed.data(), changed.size(), nullptr);
    CHECK_FALSE(decoded.index);
    CHECK_THAT(decoded.error, Catch::Contains("checksum"));
  }
  auto longer = bytes;
  longer.push_back(0);
  CHECK_THAT(bundle::decode_bundle(longer.data(), longer.size(), nullptr).error, Catch::Contains("after the end"));
  auto other_magic = bytes;
  other_magic[0] = 'X';
  CHECK_THAT(bundle::decode_bundle(other_magic.data(), other_magic.size(), nullptr).error, Catch::Contains("magic"));
}

TEST_CASE("bundle: with a key, only a bundle signed with it is used") {
  const auto key = test_key();
  const auto other = test_key("another key, 16 bytes or more");
  const auto entries = std::vector<bundle::PackedEntry>{packed("m1", sm90a(), "b")};
  const auto signed_bytes = bundle::encode_bundle(entries, "b", &key);
  const auto unsigned_bytes = bundle::encode_bundle(entries, "b", nullptr);
  CHECK(bundle::decode_bundle(signed_bytes.data(), signed_bytes.size(), &key).index->signature ==
        bundle::SignatureState::verified);
  CHECK(bundle::decode_bundle(signed_bytes.data(), signed_bytes.size(), nullptr).index->signature ==
        bundle::SignatureState::not_checked);
  CHECK_THAT(bundle::decode_bundle(signed_bytes.data(), signed_bytes.size(), &other).error,
             Catch::Contains("signature does not match"));
  CHECK_THAT(bundle::decode_bundle(unsigned_bytes.data(), unsigned_bytes.size(), &key).error, Catch::Contains("unsigned"));
}

TEST_CASE("bundle: the key file must be this user's, mode 0600, and long enough") {
  TempDir tmp;
  const std::string path = tmp / "key";
  const std::string text = "0123456789abcdef0123\n";
  write(path, std::vector<std::uint8_t>(text.begin(), text.end()), 0600);
  const auto key = bundle::read_signing_key(path);
  CHECK(key.bytes.size() == text.size() - 1);  // the newline is not part of the key
  ::chmod(path.c_str(), 0640);
  CHECK_THROWS_WITH(bundle::read_signing_key(path), Catch::Contains("mode 0640") && Catch::Contains("0600"));
  write(path, std::vector<std::uint8_t>(5, 'k'), 0600);
  CHECK_THROWS_WITH(bundle::read_signing_key(path), Catch::Contains("at least 16"));
  CHECK_THROWS_WITH(bundle::read_signing_key(tmp / "missing"), Catch::Contains("cannot open"));
}

TEST_CASE("bundle file: mmap'ed, a bad entry is skipped and counted, the others are used") {
  TempDir tmp;
  auto good = packed("m1", sm90a(), "b");
  auto bad = packed("m2", sm90a(), "b");
  bad.bytes[bad.bytes.size() - 1] ^= 0xff;  // the entry's own checksum fails; the bundle's is made over it
  const std::string path = tmp / "k.kpack";
  write(path, bundle::encode_bundle({good, bad}, "b", nullptr));
  bundle::BundleFile file(path, nullptr);
  REQUIRE(file.usable());
  CHECK(file.find(good.key, "m1", sm90a()).has_value());
  CHECK_FALSE(file.find(bad.key, "m2", sm90a()).has_value());
  CHECK_FALSE(file.find(good.key, "m2", sm90a()).has_value());  // a key under another name is bad too
  const auto report = file.report();
  CHECK(report.hits == 1);
  CHECK(report.bad_entries == 2);
  CHECK(file.verify_entries().size() == 1);
}

TEST_CASE("bundle file: truncated or group-writable on disk is refused, and finds nothing") {
  TempDir tmp;
  const auto bytes = bundle::encode_bundle({packed("m1", sm90a(), "b")}, "b", nullptr);
  const std::string path = tmp / "k.kpack";
  write(path, std::vector<std::uint8_t>(bytes.begin(), bytes.end() - 7));
  bundle::BundleFile truncated(path, nullptr);
  CHECK_FALSE(truncated.usable());
  CHECK_THAT(truncated.error(), Catch::Contains("truncated"));
  write(path, bytes, 0664);
  bundle::BundleFile writable(path, nullptr);
  CHECK_FALSE(writable.usable());
  CHECK_THAT(writable.error(), Catch::Contains("writable by group or others"));
}

TEST_CASE("provider: a bundle of another NVRTC build is refused by key, not loaded; KILN_JIT=off then says why") {
  REQUIRE_FALSE(nvrtc_build().empty());
  TempDir tmp;
  const std::string mine = tmp / "mine.kpack", other = tmp / "other.kpack";
  write(mine, bundle::encode_bundle(real_entries(nvrtc_build()), nvrtc_build(), nullptr));
  write(other, bundle::encode_bundle(real_entries("build-id 00000000000000000000000000000000000000ff"),
                                     "build-id 00000000000000000000000000000000000000ff", nullptr));
  auto mine_layer = std::make_shared<bundle::BundleFile>(mine, nullptr);
  auto other_layer = std::make_shared<bundle::BundleFile>(other, nullptr);
  REQUIRE(mine_layer->usable());
  REQUIRE(other_layer->usable());
  const KernelSource& source = embedded_modules().front();
  ::setenv("KILN_JIT", "off", 1);
  auto disk = std::make_shared<DiskCache>(config_for(tmp / "rw"));
  const auto only_other = make_module_provider(disk, Compiler(false), {other_layer});
  try {
    only_other.provide(source, sm90a());
    FAIL("the other NVRTC's bundle was used");
  } catch (const Error& e) {
    CHECK(e.context().call == "KILN_JIT");
    CHECK_THAT(e.what(), Catch::Contains("KILN_JIT=off") && Catch::Contains(source.module) &&
                             Catch::Contains("sm_90a") && Catch::Contains(other));
  }
  CHECK(other_layer->report().hits == 0);
  CHECK(other_layer->report().bad_entries == 0);  // refused by key: never even read

  const auto both = make_module_provider(disk, Compiler(false), {other_layer, mine_layer});
  const ProvidedModule provided = both.provide(source, sm90a());
  CHECK(provided.from_disk);
  CHECK_FALSE(provided.module.cubin.empty());
  CHECK(mine_layer->report().hits == 1);
  CHECK(disk->counters().compiles == 0);
  ::unsetenv("KILN_JIT");
}

TEST_CASE("cache path: a read-only folder's entry that group or others can write is skipped as bad, and stays") {
  for (const mode_t mode : {mode_t{0664}, mode_t{0646}}) {
    DYNAMIC_SECTION("mode " << std::oct << mode) {
      TempDir tmp;
      const std::string read_only = tmp / "ro";
      {
        DiskCache filler(config_for(read_only));
        filler.store(key_for("m1", sm90a()), module_for("m1", sm90a()));
      }
      const std::string entry = read_only + "/" + DiskCache::entry_name(key_for("m1", sm90a()), "m1", sm90a());
      const CachePath path = make_cache_path(tmp / "rw" + ":" + read_only, DiskCacheConfig{}, nullptr, {}, false);
      REQUIRE(path.layers.size() == 1);
      REQUIRE(path.layers[0]->report().usable);
      REQUIRE(path.layers[0]->find(key_for("m1", sm90a()), "m1", sm90a()).has_value());
      REQUIRE(::chmod(entry.c_str(), mode) == 0);
      WarningCounter warnings;
      CHECK_FALSE(path.layers[0]->find(key_for("m1", sm90a()), "m1", sm90a()).has_value());
      CHECK(path.layers[0]->report().bad_entries == 1);
      CHECK_THAT(warnings.all(), Catch::Contains("writable by group or others"));
      CHECK(std::filesystem::exists(entry));
    }
  }
}

TEST_CASE("cache path: folders after the first writable one are read-only layers, read and never written") {
  TempDir tmp;
  const std::string writable = tmp / "rw", read_only = tmp / "ro";
  // Fill a folder through a disk cache, then use it as a layer after the writable one.
  {
    DiskCache filler(config_for(read_only));
    filler.store(key_for("m1", sm90a()), module_for("m1", sm90a()));
  }
  const std::string good = read_only + "/" + DiskCache::entry_name(key_for("m1", sm90a()), "m1", sm90a());
  const std::string corrupt = read_only + "/" + DiskCache::entry_name(key_for("m2", sm90a()), "m2", sm90a());
  // Why an hour ago: the disk cache touches an entry older than its touch interval, so only a past
  // mtime shows whether the layer touched it (a future one is never touched by anyone).
  const auto an_hour_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  std::filesystem::last_write_time(good, an_hour_ago);
  const auto before = std::filesystem::last_write_time(good);
  write(corrupt, {1, 2, 3});
  const CachePath path = make_cache_path(writable + ":" + read_only + ":" + tmp / "absent", DiskCacheConfig{}, nullptr, {}, false);
  REQUIRE(path.writable_at == std::size_t{0});
  CHECK(path.writable.dir == writable);
  REQUIRE(path.layers.size() == 2);
  const auto report = path.layers[0]->report();
  CHECK(report.usable);
  CHECK(report.state == "read-only");
  CHECK(report.entries == 2);  // counted by name: the corrupt one too
  CHECK_FALSE(path.layers[1]->report().usable);
  CHECK(path.layers[0]->find(key_for("m1", sm90a()), "m1", sm90a()).has_value());
  CHECK_FALSE(path.layers[0]->find(key_for("m2", sm90a()), "m2", sm90a()).has_value());
  CHECK(path.layers[0]->report().bad_entries == 1);
  // Never written: no touch (the disk cache refreshes mtimes), no new files, nothing healed.
  CHECK(std::filesystem::last_write_time(good) == before);
  CHECK(std::filesystem::exists(corrupt));
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(read_only)) files += entry.is_regular_file() ? 1 : 0;
  CHECK(files == 2);
  // The control: a disk cache on the same folder does touch the entry and heal the corrupt one,
  // so the checks above can fail.
  {
    DiskCache writer(config_for(read_only));
    CHECK(writer.load(key_for("m1", sm90a()), "m1", sm90a()).has_value());
    CHECK_FALSE(writer.load(key_for("m2", sm90a()), "m2", sm90a()).has_value());
  }
  CHECK(std::filesystem::last_write_time(good) > before);
  CHECK_FALSE(std::filesystem::exists(corrupt));

  // Without a writable folder in the path, only an explicit KILN_CACHE_DIR is written.
  const std::string bundle_only = tmp / "absent.kpack";
  const CachePath none = make_cache_path(bundle_only, config_for(tmp / "default"), nullptr, {}, false);
  CHECK_FALSE(none.writable.dir.has_value());
  const CachePath kept = make_cache_path(bundle_only, config_for(tmp / "explicit"), nullptr, {}, true);
  CHECK(kept.writable.dir == tmp / "explicit");
}

TEST_CASE("bundle: every byte of the header and of the index is covered: changing any one is refused") {
  const auto key = test_key();
  const auto entries = std::vector<bundle::PackedEntry>{packed("m1", sm90a(), "b"), packed("m2", sm80(), "b", 300)};
  for (const bool with_key : {false, true}) {
    DYNAMIC_SECTION((with_key ? "signed, checked with its key" : "unsigned")) {
      const auto bytes = bundle::encode_bundle(entries, "b", with_key ? &key : nullptr);
      const bundle::SigningKey* check_with = with_key ? &key : nullptr;
      const auto good = bundle::decode_bundle(bytes.data(), bytes.size(), check_with);
      REQUIRE(good.index);
      REQUIRE(good.index->records.size() == 2);
      // The index ends where the first entry begins.
      const auto index_end = static_cast<std::size_t>(good.index->records.front().offset);
      REQUIRE(index_end > bundle::bundle_header_bytes);
      std::size_t accepted = 0;
      for (std::size_t at = 0; at < index_end; ++at) {
        for (const std::uint8_t mask : {std::uint8_t{0x01}, std::uint8_t{0x80}, std::uint8_t{0xff}}) {
          auto changed = bytes;
          changed[at] ^= mask;
          const auto decoded = bundle::decode_bundle(changed.data(), changed.size(), check_with);
          if (decoded.index) {
            ++accepted;
            UNSCOPED_INFO("byte " << at << " ^ 0x" << std::hex << int{mask} << std::dec << " accepted");
          }
        }
      }
      CHECK(accepted == 0);
    }
  }
}

TEST_CASE("bundle: the flags and the signature field must agree, and unknown flags are refused") {
  const auto bytes = bundle::encode_bundle({packed("m1", sm90a(), "b")}, "b", nullptr);
  auto flagged = bytes;
  flagged[12] |= 0x01;  // "signed" over an all-zero signature field
  CHECK_THAT(bundle::decode_bundle(flagged.data(), flagged.size(), nullptr).error,
             Catch::Contains("signed") && Catch::Contains("zeros"));
  auto unknown = bytes;
  unknown[15] |= 0x40;
  CHECK_THAT(bundle::decode_bundle(unknown.data(), unknown.size(), nullptr).error, Catch::Contains("unknown flags"));
  auto stray = bytes;
  stray[60] = 0x5a;  // a byte in the signature field of an unsigned bundle
  CHECK_THAT(bundle::decode_bundle(stray.data(), stray.size(), nullptr).error,
             Catch::Contains("unsigned") && Catch::Contains("not all zeros"));
}

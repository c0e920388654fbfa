// The disk cache's entries: a miss, a store and a hit with exact counts; every kind of bad entry
// detected, deleted and healed; evict; the mode of a published file; stats, verify and clear.
#include <catch2/catch.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/disk/cache_entry.hpp"
#include "cache/disk/entry_file.hpp"
#include "cache/disk/unique_fd.hpp"
#include "cache_test_support.hpp"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("disk cache: a miss, a store and a hit, with exact counts and the full module back") {
  TempDir tmp;
  const std::string dir = tmp / "nested/kiln";
  WarningCounter warnings;
  DiskCache cache(config_for(dir));
  REQUIRE(cache.status().mode == DiskCacheMode::read_write);
  CHECK(cache.status().reason.empty());
  struct stat info {};
  REQUIRE(::stat(dir.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0700);

  const auto key = key_for(quant, sm90a());
  CHECK_FALSE(cache.load(key, quant, sm90a()).has_value());
  const auto module = module_for(quant, sm90a());
  cache.store(key, module);
  const auto name = DiskCache::entry_name(key, quant, sm90a());
  CHECK(name == quant + ".sm_90a." + key.hex() + ".kiln");
  REQUIRE(::stat((dir + "/" + name).c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);

  const auto loaded = cache.load(key, quant, sm90a());
  REQUIRE(loaded.has_value());
  CHECK(same_module(*loaded, module));
  // Same key asked for as another module or target: not this entry.
  CHECK_FALSE(cache.load(key, "other_module", sm90a()).has_value());

  const auto counts = cache.counters();
  CHECK(counts.disk_hits == 1);
  CHECK(counts.disk_misses == 2);
  CHECK(counts.corrupt_healed == 0);
  CHECK(counts.store_failures == 0);
  CHECK(warnings.count() == 0);
  CHECK(files_in(dir) == 1);  // the entry; no temporary left behind
}

TEST_CASE("disk cache: load_or_compile compiles once, then every cache on the folder hits") {
  TempDir tmp;
  FakeCompiler compiler;
  const auto key = key_for(quant, sm90a());
  {
    DiskCache cache(config_for(tmp.path()));
    const auto first = cache.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a()));
    CHECK(first.outcome == CacheOutcome::compiled);
    CHECK(same_module(first.module, module_for(quant, sm90a())));
    const auto second = cache.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a()));
    CHECK(second.outcome == CacheOutcome::hit);
    CHECK(same_module(second.module, first.module));
    const auto counts = cache.counters();
    CHECK(counts.disk_misses == 1);
    CHECK(counts.disk_hits == 1);
    CHECK(counts.compiles == 1);
    CHECK(counts.lock_waits == 0);
  }
  DiskCache again(config_for(tmp.path()));
  CHECK(again.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a())).outcome == CacheOutcome::hit);
  CHECK(again.counters().disk_hits == 1);
  CHECK(again.counters().disk_misses == 0);
  CHECK(compiler.calls == 1);
}

TEST_CASE("disk cache: every kind of bad entry is detected, deleted, counted, warned about once and healed") {
  TempDir tmp;
  TempDir outside;
  const auto key = key_for(quant, sm90a());
  const auto other_key = key_for(quant, sm80());
  const std::string path = tmp / DiskCache::entry_name(key, quant, sm90a());
  const auto good = encode_entry(key, module_for(quant, sm90a()), "13.0", 0);

  struct Corruption {
    const char* name;
    std::function<void()> apply;
  };
  auto replace = [&](std::vector<std::uint8_t> bytes) {
    ::unlink(path.c_str());
    write_bytes(path, bytes);
  };
  auto flipped = [&](std::size_t at) {
    auto bytes = good;
    bytes[at] ^= 0x20;
    return bytes;
  };
  std::vector<Corruption> corruptions = {
      {"truncated to half", [&] { replace({good.begin(), good.begin() + good.size() / 2}); }},
      {"truncated inside the header", [&] { replace({good.begin(), good.begin() + 10}); }},
      {"one byte short", [&] { replace({good.begin(), good.end() - 1}); }},
      {"flipped payload byte", [&] { replace(flipped(good.size() - 100)); }},
      {"flipped header byte", [&] { replace(flipped(50)); }},
      {"flipped magic", [&] { replace(flipped(0)); }},
      {"wrong key", [&] { replace(encode_entry(other_key, module_for(quant, sm90a()), "13.0", 0)); }},
      {"other module under this name", [&] { replace(encode_entry(key, module_for("other", sm90a()), "13.0", 0)); }},
      {"empty", [&] { replace({}); }},
      {"garbage", [&] {
         std::vector<std::uint8_t> bytes(4096);
         for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7919 >> 3);
         replace(bytes);
       }},
      {"symlink to a good entry outside the folder", [&] {
         write_bytes(outside / "entry", good);
         ::unlink(path.c_str());
         REQUIRE(::symlink((outside / "entry").c_str(), path.c_str()) == 0);
       }},
      {"FIFO", [&] {
         ::unlink(path.c_str());
         REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
       }},
      {"empty folder", [&] {
         ::unlink(path.c_str());
         REQUIRE(::mkdir(path.c_str(), 0700) == 0);
       }},
      {"good, but writable by group", [&] {
         replace(good);
         REQUIRE(::chmod(path.c_str(), 0660) == 0);
       }},
      {"good, but writable by others", [&] {
         replace(good);
         REQUIRE(::chmod(path.c_str(), 0602) == 0);
       }},
  };
  if (::geteuid() == 0)
    corruptions.push_back({"owned by another user", [&] {
                             replace(good);
                             REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
                           }});

  for (const auto& corruption : corruptions) {
    DYNAMIC_SECTION(corruption.name) {
      DiskCache cache(config_for(tmp.path()));
      corruption.apply();
      WarningCounter warnings;
      CHECK_FALSE(cache.load(key, quant, sm90a()).has_value());
      CHECK(cache.counters().corrupt_healed == 1);
      CHECK(cache.counters().disk_misses == 1);
      CHECK(warnings.count() == 1);
      CHECK(warnings.all().find(DiskCache::entry_name(key, quant, sm90a())) != std::string::npos);
      CHECK_FALSE(exists(path));
      CHECK(exists(outside / "entry") == (std::string(corruption.name).find("symlink") != std::string::npos));

      FakeCompiler compiler;
      const auto healed = cache.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a()));
      CHECK(healed.outcome == CacheOutcome::compiled);
      CHECK(same_module(healed.module, module_for(quant, sm90a())));
      CHECK(compiler.calls == 1);
      REQUIRE(cache.load(key, quant, sm90a()).has_value());
      CHECK(cache.counters().corrupt_healed == 1);
      CHECK(warnings.count() == 1);
    }
  }
}

TEST_CASE("disk cache: load_or_compile heals a bad entry and counts one miss, not two") {
  TempDir tmp;
  const auto key = key_for(quant, sm90a());
  write_bytes(tmp / DiskCache::entry_name(key, quant, sm90a()), {1, 2, 3});
  DiskCache cache(config_for(tmp.path()));
  FakeCompiler compiler;
  CHECK(cache.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a())).outcome == CacheOutcome::compiled);
  const auto counts = cache.counters();
  CHECK(counts.corrupt_healed == 1);
  CHECK(counts.disk_misses == 1);
  CHECK(counts.disk_hits == 0);
  CHECK(counts.compiles == 1);
}

TEST_CASE("disk cache: evict removes an entry the driver refused, so the next call compiles afresh") {
  TempDir tmp;
  DiskCache cache(config_for(tmp.path()));
  const auto key = key_for(quant, sm90a());
  cache.store(key, module_for(quant, sm90a()));
  cache.evict(key, quant, sm90a());
  CHECK(cache.counters().rejected == 1);
  cache.evict(key, quant, sm90a());  // already gone: harmless, not counted
  CHECK(cache.counters().rejected == 1);
  FakeCompiler compiler;
  CHECK(cache.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a())).outcome == CacheOutcome::compiled);
  CHECK(compiler.calls == 1);
}

TEST_CASE("disk cache: a published file has the mode asked for (0600 by default), whatever the umask") {
  TempDir tmp;
  const detail::UniqueFd dir(::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir);
  const auto mode_of = [&](const std::string& name) {
    struct stat info {};
    REQUIRE(::stat((tmp / name).c_str(), &info) == 0);
    return info.st_mode & 07777;
  };
  const mode_t umask_before = ::umask(077);
  const std::string shared = detail::publish_entry_file(dir.get(), "shared", {1, 2, 3}, 0644);
  const std::string own = detail::publish_entry_file(dir.get(), "own", {1, 2, 3});
  ::umask(umask_before);
  REQUIRE(shared.empty());
  REQUIRE(own.empty());
  CHECK(mode_of("shared") == 0644);
  CHECK(mode_of("own") == 0600);
}

TEST_CASE("disk cache: stats, verify and clear see kiln's files only") {
  TempDir tmp;
  DiskCache cache(config_for(tmp.path()));
  FakeCompiler compiler;
  for (const auto* m : {"a", "b", "c"}) cache.store(key_for(m, sm90a()), module_for(m, sm90a()));
  cache.load_or_compile(key_for("a", sm80()), "a", sm80(), compiler.make("a", sm80()));
  const std::string temp = DiskCache::entry_name(key_for("z", sm80()), "z", sm80()) + ".00000000000000aa.tmp";
  write_bytes(tmp / temp, {9});
  for (const auto* other : {"notes.txt", "x.sm_90a.kiln", "a.sm_90a.0123.kiln", "A.B.C.D.kiln"})
    write_bytes(tmp / other, {1, 2});

  const auto entry_bytes = encode_entry(key_for("a", sm90a()), module_for("a", sm90a()), "13.0", 0).size();
  const auto sm80_bytes = encode_entry(key_for("a", sm80()), module_for("a", sm80()), "13.0", 0).size();
  auto stats = cache.stats();
  CHECK(stats.entries == 4);
  CHECK(stats.bytes == 3 * entry_bytes + sm80_bytes);
  CHECK(stats.temp_files == 1);
  CHECK(stats.lock_files == 1);
  REQUIRE(stats.per_target.size() == 2);
  CHECK(stats.per_target["sm_90a"].entries == 3);
  CHECK(stats.per_target["sm_90a"].bytes == 3 * entry_bytes);
  CHECK(stats.per_target["sm_80"].entries == 1);
  CHECK(stats.per_target["sm_80"].bytes == sm80_bytes);

  CHECK(cache.verify().good == 4);
  CHECK(cache.verify().bad.empty());
  const auto b = tmp / DiskCache::entry_name(key_for("b", sm90a()), "b", sm90a());
  auto bytes = read_bytes(b);
  bytes[bytes.size() / 2] ^= 1;
  write_bytes(b, bytes);
  // An entry of module "c" under the name of module "d": whole and checksummed, but not what it says.
  const auto c_bytes = read_bytes(tmp / DiskCache::entry_name(key_for("c", sm90a()), "c", sm90a()));
  write_bytes(tmp / DiskCache::entry_name(key_for("c", sm90a()), "d", sm90a()), c_bytes);
  const auto report = cache.verify();
  CHECK(report.good == 3);
  REQUIRE(report.bad.size() == 2);
  std::set<std::string> bad_names;
  for (const auto& entry : report.bad) {
    bad_names.insert(entry.file);
    CHECK_FALSE(entry.reason.empty());
  }
  CHECK(bad_names.count(DiskCache::entry_name(key_for("b", sm90a()), "b", sm90a())) == 1);
  CHECK(bad_names.count(DiskCache::entry_name(key_for("c", sm90a()), "d", sm90a())) == 1);
  CHECK(exists(b));  // verify reports; it deletes nothing

  CHECK(cache.clear() == 7);  // 5 entries, 1 temporary file, 1 lock file
  CHECK(cache.stats().entries == 0);
  CHECK(files_in(tmp.path()) == 4);
  for (const auto* other : {"notes.txt", "x.sm_90a.kiln", "a.sm_90a.0123.kiln", "A.B.C.D.kiln"}) CHECK(exists(tmp / other));
}

// The disk cache's size bound: least recently used entries go first, the folder stays under the
// bound at every store, an entry larger than the bound is not stored, stale temporary files go, and
// an entry above one process's bound is never deleted as bad.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <string>

#include "cache/disk/cache_entry.hpp"
#include "cache_test_support.hpp"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("disk cache: the least recently used entries go first; a hit counts as a use") {
  TempDir tmp;
  const auto entry_bytes = encode_entry(key_for("a", sm90a()), module_for("a", sm90a()), "13.0", 0).size();
  DiskCache cache(config_for(tmp.path(), 3 * entry_bytes + entry_bytes / 2));
  FakeCompiler compiler;
  cache.store(key_for("a", sm90a()), module_for("a", sm90a()));
  cache.load_or_compile(key_for("b", sm90a()), "b", sm90a(), compiler.make("b", sm90a()));
  cache.store(key_for("c", sm90a()), module_for("c", sm90a()));
  const auto path = [&](const std::string& m) { return tmp / DiskCache::entry_name(key_for(m, sm90a()), m, sm90a()); };
  const auto lock = tmp / ("b.sm_90a." + key_for("b", sm90a()).hex() + ".lock");
  REQUIRE(exists(lock));
  set_age(path("a"), 3000);
  set_age(path("b"), 2000);
  set_age(path("c"), 1000);
  REQUIRE(cache.load(key_for("a", sm90a()), "a", sm90a()).has_value());  // refreshes a
  CHECK(cache.counters().evictions == 0);

  cache.store(key_for("d", sm90a()), module_for("d", sm90a()));
  CHECK(cache.counters().evictions == 1);
  CHECK(exists(path("a")));
  CHECK_FALSE(exists(path("b")));
  CHECK_FALSE(exists(lock));  // an evicted entry's idle lock file goes with it
  CHECK(exists(path("c")));
  CHECK(exists(path("d")));
  CHECK(cache.stats().bytes <= cache.config().max_bytes);
}

TEST_CASE("disk cache: eviction keeps the folder under the bound at every store") {
  TempDir tmp;
  // Names of one width, so every entry has the same size.
  const auto entry_bytes = encode_entry(key_for("m00", sm90a()), module_for("m00", sm90a()), "13.0", 0).size();
  const std::uint64_t bound = 5 * entry_bytes;
  DiskCache cache(config_for(tmp.path(), bound));
  for (int i = 0; i < 20; ++i) {
    const std::string m = (i < 10 ? "m0" : "m") + std::to_string(i);
    cache.store(key_for(m, sm90a()), module_for(m, sm90a()));
    CAPTURE(i);
    const auto stats = cache.stats();
    CHECK(stats.bytes <= bound);
    CHECK(stats.entries == static_cast<std::uint64_t>(std::min(i + 1, 5)));
  }
  CHECK(cache.counters().evictions == 15);
}

TEST_CASE("disk cache: an entry larger than the bound is not stored") {
  TempDir tmp;
  WarningCounter warnings;
  DiskCache cache(config_for(tmp.path(), 500));
  cache.store(key_for(quant, sm90a()), module_for(quant, sm90a()));
  CHECK(cache.counters().store_failures == 1);
  CHECK(warnings.count() == 1);
  CHECK(files_in(tmp.path()) == 0);
}

TEST_CASE("disk cache: the eviction pass removes stale temporary files and leaves other files alone") {
  TempDir tmp;
  DiskCache cache(config_for(tmp.path()));
  const auto key = key_for(quant, sm90a());
  const auto entry = DiskCache::entry_name(key, quant, sm90a());
  const std::string stale = entry + ".0123456789abcdef.tmp";
  const std::string fresh = entry + ".fedcba9876543210.tmp";
  write_bytes(tmp / stale, {1, 2, 3});
  write_bytes(tmp / fresh, {1, 2, 3});
  write_bytes(tmp / "notes.txt", {1});
  set_age(tmp / stale, 3600);
  set_age(tmp / "notes.txt", 3600);
  CHECK(cache.enforce_bound() == 0);
  CHECK_FALSE(exists(tmp / stale));
  CHECK(exists(tmp / fresh));
  CHECK(exists(tmp / "notes.txt"));
}

TEST_CASE("disk cache: an entry above this process's bound is a miss, never deleted; a larger bound still hits") {
  // Why: processes may run with different KILN_CACHE_MAX_BYTES on one folder; a small-bound process
  // must not delete, as "bad", valid work of a large-bound one.
  TempDir tmp;
  const auto key = key_for(quant, sm90a());
  const auto module = module_for(quant, sm90a(), 64 * 1024);
  const std::string entry = tmp / DiskCache::entry_name(key, quant, sm90a());
  {
    DiskCache large(config_for(tmp.path()));
    large.store(key, module);
    REQUIRE(large.counters().store_failures == 0);
  }
  REQUIRE(exists(entry));
  const auto bytes = read_bytes(entry);

  WarningCounter warnings;
  DiskCache small(config_for(tmp.path(), 16 * 1024));
  CHECK_FALSE(small.load(key, quant, sm90a()).has_value());
  CHECK(small.counters().disk_misses == 1);
  CHECK(small.counters().corrupt_healed == 0);
  CHECK(exists(entry));
  CHECK(read_bytes(entry) == bytes);
  CHECK(warnings.count() == 0);

  const auto report = small.verify();
  CHECK(report.good == 0);
  CHECK(report.bad.empty());
  REQUIRE(report.skipped.size() == 1);
  CHECK(report.skipped[0].file == DiskCache::entry_name(key, quant, sm90a()));
  CHECK_THAT(report.skipped[0].reason, Catch::Contains("more than this process's cache bound"));

  // load_or_compile: a miss, a compile, a store refused for size; the large entry stays.
  FakeCompiler compiler;
  const std::function<CompiledModule()> compile_large = [&compiler, &module] {
    ++compiler.calls;
    return module;
  };
  CHECK(small.load_or_compile(key, quant, sm90a(), compile_large).outcome == CacheOutcome::compiled);
  CHECK(compiler.calls == 1);
  CHECK(small.counters().corrupt_healed == 0);
  CHECK(exists(entry));

  DiskCache large_again(config_for(tmp.path()));
  const auto found = large_again.load(key, quant, sm90a());
  REQUIRE(found.has_value());
  CHECK(same_module(*found, module));
  CHECK(large_again.counters().disk_hits == 1);
  CHECK(large_again.counters().corrupt_healed == 0);

  // What may remove it in the small-bound process: the eviction pass, counted as an eviction.
  set_age(entry, 3600);  // the least recently used, whatever the clock's granularity
  small.store(key_for("other", sm90a()), module_for("other", sm90a(), 1000));
  CHECK_FALSE(exists(entry));
  CHECK(small.counters().evictions == 1);
  CHECK(small.counters().corrupt_healed == 0);
}

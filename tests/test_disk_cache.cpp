#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/env.hpp"
#include "cache/disk/cache_entry.hpp"
#include "cache/disk/entry_file.hpp"
#include "cache/disk/unique_fd.hpp"
#include "cache_test_support.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

bool exists(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void set_age(const std::string& path, std::time_t seconds_ago) {
  const timespec when[2] = {{std::time(nullptr) - seconds_ago, 0}, {std::time(nullptr) - seconds_ago, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), when, AT_SYMLINK_NOFOLLOW) == 0);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::size_t files_in(const std::string& dir) {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& item : std::filesystem::directory_iterator(dir)) ++count;
  return count;
}

/// A compile function that counts its calls.
struct FakeCompiler {
  std::atomic<int> calls{0};
  std::function<CompiledModule()> make(const std::string& module, const Target& target) {
    return [this, module, target] {
      ++calls;
      return module_for(module, target);
    };
  }
};

const std::string quant = "per_token_group_quant_fp8";

}  // namespace

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

TEST_CASE("disk cache: an unsafe or unusable folder degrades to memory only with one warning") {
  TempDir tmp;
  std::string dir = tmp / "cache";
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  std::string expected;
  SECTION("owned by another user") {
    if (::geteuid() == 0) {
      REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
    } else {
      dir = "/";  // owned by root, not by us
    }
    expected = "owned by uid";
  }
  SECTION("writable by group") {
    REQUIRE(::chmod(dir.c_str(), 0770) == 0);
    expected = "writable by group or others (mode 0770)";
  }
  SECTION("writable by others") {
    REQUIRE(::chmod(dir.c_str(), 0703) == 0);
    expected = "writable by group or others";
  }
  SECTION("a file instead of a folder") {
    REQUIRE(::rmdir(dir.c_str()) == 0);
    write_bytes(dir, {1});
    expected = "Not a directory";
  }
  SECTION("a symlink to a folder of another user") {
    if (::geteuid() == 0) {
      REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
      REQUIRE(::symlink(dir.c_str(), (tmp / "link").c_str()) == 0);
      dir = tmp / "link";
      expected = "owned by uid 65534";
    } else {
      expected = "";
    }
  }
  if (expected.empty()) return;
  WarningCounter warnings;
  DiskCache cache(config_for(dir));
  CHECK(cache.status().mode == DiskCacheMode::memory_only);
  CHECK(cache.status().reason.find(expected) != std::string::npos);
  CHECK(warnings.count() == 1);
  FakeCompiler compiler;
  const auto key = key_for(quant, sm90a());
  for (int i = 0; i < 2; ++i)
    CHECK(cache.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a())).outcome == CacheOutcome::compiled);
  cache.store(key, module_for(quant, sm90a()));
  CHECK_FALSE(cache.load(key, quant, sm90a()).has_value());
  CHECK(compiler.calls == 2);
  CHECK(warnings.count() == 1);
  CHECK(cache.stats().entries == 0);
  if (std::filesystem::is_directory(dir) && dir != "/") CHECK(files_in(dir) == 0);
}

TEST_CASE("disk cache: a folder that is ours, not writable by others, or a symlink to such, is used") {
  TempDir tmp;
  const std::string dir = tmp / "cache";
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  REQUIRE(::symlink(dir.c_str(), (tmp / "link").c_str()) == 0);
  WarningCounter warnings;
  CHECK(DiskCache(config_for(dir)).status().mode == DiskCacheMode::read_write);
  CHECK(DiskCache(config_for(tmp / "link")).status().mode == DiskCacheMode::read_write);
  CHECK(warnings.count() == 0);
}

TEST_CASE("disk cache: a read-only folder degrades to memory only with one warning") {
  // Why a child: root ignores mode bits, so as root the child becomes uid 65534 to see them.
  TempDir tmp;
  const std::string dir = tmp / "cache";
  REQUIRE(::mkdir(dir.c_str(), 0500) == 0);
  if (::geteuid() == 0) {
    REQUIRE(::chown(tmp.path().c_str(), 65534, 65534) == 0);
    REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
  }
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(10);
    int failures = 0;
    {
      WarningCounter warnings;
      DiskCache cache(config_for(dir));
      if (cache.status().mode != DiskCacheMode::memory_only) failures |= 1;
      if (cache.status().reason.find("not writable") == std::string::npos) failures |= 2;
      if (warnings.count() != 1) failures |= 4;
      FakeCompiler compiler;
      const auto key = key_for(quant, sm90a());
      if (cache.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a())).outcome != CacheOutcome::compiled)
        failures |= 8;
      if (warnings.count() != 1) failures |= 16;
    }
    ::_exit(failures);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(files_in(dir) == 0);
}

TEST_CASE("disk cache: a file size limit (full disk) fails stores with one warning and no signal") {
  TempDir tmp;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int failures = 0;
    {
      DiskCache cache(config_for(tmp.path()));
      const rlimit limit{4096, 4096};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(100);
      WarningCounter warnings;
      FakeCompiler compiler;
      for (const auto* m : {"a", "b"}) {
        const auto result = cache.load_or_compile(key_for(m, sm90a()), m, sm90a(), [&] {
          return module_for(m, sm90a(), 64 * 1024);
        });
        if (result.outcome != CacheOutcome::compiled || result.module.cubin.size() != 64 * 1024) failures |= 1;
      }
      if (cache.counters().store_failures != 2) failures |= 2;
      if (warnings.count() != 1) failures |= 4;
      if (warnings.all().find("RLIMIT_FSIZE") == std::string::npos) failures |= 8;
      if (cache.stats().entries != 0 || cache.stats().temp_files != 0) failures |= 16;
    }
    ::_exit(failures);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));  // not killed by SIGXFSZ
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("disk cache: the folder vanishing under a running cache costs a warning, not a failure") {
  TempDir tmp;
  const std::string dir = tmp / "cache";
  DiskCache cache(config_for(dir));
  REQUIRE(cache.status().mode == DiskCacheMode::read_write);
  std::filesystem::remove_all(dir);
  write_bytes(dir, {1});  // the folder replaced by a file
  WarningCounter warnings;
  FakeCompiler compiler;
  for (const auto* m : {"a", "b"}) {
    const auto result = cache.load_or_compile(key_for(m, sm90a()), m, sm90a(), compiler.make(m, sm90a()));
    CHECK(result.outcome == CacheOutcome::compiled_without_lock);
    CHECK(same_module(result.module, module_for(m, sm90a())));
  }
  CHECK(cache.counters().store_failures == 2);
  CHECK(cache.counters().lock_failures == 2);
  CHECK(warnings.count() == 2);  // one for the lock, one for the store
  CHECK(cache.stats().entries == 0);
}

TEST_CASE("disk cache: a lock file that is a symlink is not followed; the compile goes on without it") {
  TempDir tmp;
  TempDir outside;
  const auto key = key_for(quant, sm90a());
  const auto lock = tmp / (quant + ".sm_90a." + key.hex() + ".lock");
  REQUIRE(::symlink((outside / "target").c_str(), lock.c_str()) == 0);
  DiskCache cache(config_for(tmp.path()));
  FakeCompiler compiler;
  CHECK(cache.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a())).outcome ==
        CacheOutcome::compiled_without_lock);
  CHECK(cache.counters().lock_failures == 1);
  CHECK_FALSE(exists(outside / "target"));
  CHECK(cache.load(key, quant, sm90a()).has_value());
}

TEST_CASE("disk cache: many threads on one cache compile each key once") {
  TempDir tmp;
  DiskCache cache(config_for(tmp.path()));
  std::atomic<int> compiles[4] = {};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        const int k = (t + round) % 4;
        const std::string m = "m" + std::to_string(k);
        const auto result = cache.load_or_compile(key_for(m, sm90a()), m, sm90a(), [&, k, m] {
          ++compiles[k];
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          return module_for(m, sm90a());
        });
        if (!same_module(result.module, module_for(m, sm90a()))) ++bad;
      }
    });
  for (auto& thread : threads) thread.join();
  for (auto& count : compiles) CHECK(count == 1);
  CHECK(bad == 0);
  const auto counts = cache.counters();
  CHECK(counts.compiles == 4);
  CHECK(counts.disk_misses == 4);
  CHECK(counts.disk_hits == 28);
}

TEST_CASE("disk cache: configuration from the environment") {
  const char* names[] = {"KILN_CACHE", "KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "KILN_CACHE_MAX_BYTES"};
  std::vector<std::optional<std::string>> saved;
  for (const auto* name : names) saved.push_back(env_value(name));
  for (const auto* name : names) ::unsetenv(name);

  ::setenv("HOME", "/home/someone", 1);
  CHECK(DiskCacheConfig::from_env().dir == std::optional<std::string>("/home/someone/.cache/kiln"));
  ::setenv("XDG_CACHE_HOME", "relative/cache", 1);  // invalid per XDG: ignored
  CHECK(DiskCacheConfig::from_env().dir == std::optional<std::string>("/home/someone/.cache/kiln"));
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  CHECK(DiskCacheConfig::from_env().dir == std::optional<std::string>("/xdg/kiln"));
  ::setenv("KILN_CACHE_DIR", "/explicit", 1);
  const auto config = DiskCacheConfig::from_env(Version{13, 0});
  CHECK(config.dir == std::optional<std::string>("/explicit"));
  CHECK(config.max_bytes == (std::uint64_t{1} << 30));
  CHECK(config.nvrtc == std::optional<Version>(Version{13, 0}));

  ::setenv("KILN_CACHE_MAX_BYTES", "64M", 1);
  CHECK(DiskCacheConfig::from_env().max_bytes == (std::uint64_t{64} << 20));
  {
    WarningCounter warnings;
    for (const auto* bad : {"0", "lots", "-1"}) {
      ::setenv("KILN_CACHE_MAX_BYTES", bad, 1);
      CHECK(DiskCacheConfig::from_env().max_bytes == (std::uint64_t{1} << 30));
    }
    CHECK(warnings.count() == 3);
  }
  ::unsetenv("KILN_CACHE_MAX_BYTES");

  ::setenv("KILN_CACHE", "0", 1);
  {
    WarningCounter warnings;
    const auto off = DiskCacheConfig::from_env();
    CHECK_FALSE(off.dir.has_value());
    CHECK(off.disabled_reason == "KILN_CACHE=0");
    DiskCache cache(off);
    CHECK(cache.status().mode == DiskCacheMode::disabled);
    FakeCompiler compiler;
    CHECK(cache.load_or_compile(key_for(quant, sm90a()), quant, sm90a(), compiler.make(quant, sm90a())).outcome ==
          CacheOutcome::compiled);
    CHECK(cache.counters().compiles == 1);
    CHECK(cache.counters().disk_misses == 0);
    CHECK(warnings.count() == 0);
  }
  ::setenv("KILN_CACHE", "1", 1);
  CHECK(DiskCacheConfig::from_env().dir.has_value());

  for (std::size_t i = 0; i < saved.size(); ++i) {
    if (saved[i])
      ::setenv(names[i], saved[i]->c_str(), 1);
    else
      ::unsetenv(names[i]);
  }
}

// Manual timing, not run by default: `test_disk_cache "[perf]"`. Prints, asserts only correctness.
TEST_CASE("disk cache timings: hit of a 100 KB entry with 10 and 10,000 entries, and an eviction pass", "[.][perf]") {
  TempDir tmp;
  DiskCache cache(config_for(tmp.path()));
  const auto key = key_for(quant, sm90a());
  cache.store(key, module_for(quant, sm90a(), 100 * 1024));
  auto fill = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      const std::string m = "filler" + std::to_string(i);
      const auto k = key_for(m, sm90a());
      const auto path = tmp / DiskCache::entry_name(k, m, sm90a());
      write_bytes(path, encode_entry(k, module_for(m, sm90a(), 1000), "13.0", 0));
      set_age(path, 100000 - i);
    }
  };
  // Why CPU time too: on a shared machine wall time mostly measures the other processes.
  auto cpu_us = [] {
    timespec now{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return now.tv_sec * 1e6 + now.tv_nsec / 1e3;
  };
  auto time_hits = [&](const char* what) {
    constexpr int rounds = 2000;
    std::vector<double> us;
    const double cpu_start = cpu_us();
    for (int i = 0; i < rounds; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const auto loaded = cache.load(key, quant, sm90a());
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
      REQUIRE(loaded.has_value());
    }
    const double cpu = (cpu_us() - cpu_start) / rounds;
    std::sort(us.begin(), us.end());
    std::printf("hit, 100 KB entry, %s: wall median %.1f us, p99 %.1f us; CPU %.1f us per hit\n", what,
                us[us.size() / 2], us[us.size() * 99 / 100], cpu);
  };
  fill(0, 9);
  time_hits("10 entries");
  fill(9, 9999);
  time_hits("10,000 entries");

  const auto total = cache.stats().bytes;
  auto pass = [&](std::uint64_t bound, const char* what) {
    DiskCache bounded(config_for(tmp.path(), bound));
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_us();
    const auto evicted = bounded.enforce_bound();
    const double cpu_ms = (cpu_us() - cpu_start) / 1000;
    std::printf("eviction pass over %llu entries (%s): wall %.1f ms, CPU %.1f ms, %llu evicted\n",
                static_cast<unsigned long long>(cache.stats().entries + evicted), what, ms_since(start), cpu_ms,
                static_cast<unsigned long long>(evicted));
    CHECK(bounded.stats().bytes <= bound);
  };
  pass(total, "under the bound");
  pass(total - 500 * 1024, "evicting ~500 KB");
}

TEST_CASE("disk cache: /proc and /sys are never read-write, even for root, whose mode bits all pass") {
  // Why: as root every permission check passes, so /proc (owned by root, mode 0555) looked usable
  // and `kiln warm` "compiled into" it while every store failed. Only creating a file tells.
  for (const std::string dir : {"/proc", "/sys"}) {
    CAPTURE(dir);
    if (!std::filesystem::is_directory(dir)) continue;  // Why: a container without /sys
    WarningCounter warnings;
    DiskCache cache(config_for(dir));
    CHECK(cache.status().mode == DiskCacheMode::memory_only);
    CHECK_THAT(cache.status().reason, Catch::Contains("'" + dir + "'"));
    if (::geteuid() == 0)  // the owner and mode checks pass for root; the probe must refuse it
      CHECK_THAT(cache.status().reason, Catch::Contains("is not writable: cannot create a file in it: "));
    else
      CHECK_THAT(cache.status().reason, Catch::Contains("owned by uid 0"));
    REQUIRE(warnings.count() == 1);
    CHECK_THAT(warnings.all(), Catch::Contains(dir) && Catch::Contains("memory only"));
    FakeCompiler compiler;
    const auto key = key_for(quant, sm90a());
    CHECK(cache.load_or_compile(key, quant, sm90a(), compiler.make(quant, sm90a())).outcome == CacheOutcome::compiled);
    CHECK(cache.counters().store_failures == 0);  // nothing was attempted, so nothing failed
    CHECK(warnings.count() == 1);
  }
}

TEST_CASE("disk cache: the writability probe names the errno and leaves no file behind") {
  TempDir tmp;
  const std::string dir = tmp / "cache";
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  {
    DiskCache cache(config_for(dir));
    REQUIRE(cache.status().mode == DiskCacheMode::read_write);
  }
  CHECK(files_in(dir) == 0);

  // A read-only bind mount of the folder, in a child with its own mount namespace (as root, or in
  // a user namespace where the kernel allows one): EROFS whatever the mode bits say.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    bool in_namespace = ::unshare(CLONE_NEWNS) == 0;
    if (!in_namespace) {
      const uid_t uid = ::geteuid();
      const gid_t gid = ::getegid();
      const auto write_file = [](const char* path, const std::string& text) {
        const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) return false;
        const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ::close(fd);
        return ok;
      };
      in_namespace = ::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 && write_file("/proc/self/setgroups", "deny") &&
                     write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") &&
                     write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
    }
    if (!in_namespace || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(77);
    if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(nullptr, dir.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
      ::_exit(77);
    int failures = 0;
    {
      WarningCounter warnings;
      DiskCache cache(config_for(dir));
      if (cache.status().mode != DiskCacheMode::memory_only) failures |= 1;
      if (cache.status().reason.find("'" + dir + "' is not writable") == std::string::npos) failures |= 2;
      if (cache.status().reason.find(std::strerror(EROFS)) == std::string::npos) failures |= 4;
      if (warnings.count() != 1) failures |= 8;
    }
    ::_exit(failures);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    WARN("no mount namespace here: the read-only bind mount case is not tested");
    return;
  }
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(files_in(dir) == 0);
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

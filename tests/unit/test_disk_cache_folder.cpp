// The disk cache's folder: where it is (the environment), and every way it can be unsafe or
// unusable (another owner, group- or world-writable, read-only, a full disk, vanishing, /proc, a
// read-only mount, a lock file planted as a symlink), each costing one warning, never a failure.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/env.hpp"
#include "cache_test_support.hpp"

using namespace kiln;
using namespace kiln::test;

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

TEST_CASE("disk cache: configuration from the environment") {
  const char* names[] = {"KILN_CACHE", "KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "KILN_CACHE_MAX_BYTES"};
  std::vector<std::optional<std::string>> saved;
  for (const auto* name : names)
    saved.push_back(std::getenv(name) ? std::optional<std::string>(std::getenv(name)) : std::nullopt);
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

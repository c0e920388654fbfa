// Cache folder tricks beyond tests/unit/test_disk_cache_folder.cpp: links planted where kiln writes, the
// folder swapped under a running cache, names that try to leave the folder, an entry too large to
// read, and a real full disk (a tiny tmpfs, where the kernel allows a mount namespace).
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/disk/cache_entry.hpp"
#include "cache/disk/entry_file.hpp"
#include "cache/disk/unique_fd.hpp"
#include "cache_test_support.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

bool is_regular(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& item : std::filesystem::directory_iterator(dir)) names.push_back(item.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

std::function<CompiledModule()> compile_of(const std::string& module, const Target& target, int& calls,
                                           std::size_t bytes = 1000) {
  return [&calls, module, target, bytes] {
    ++calls;
    return module_for(module, target, bytes);
  };
}

int wait_exit_code(pid_t child) {
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

bool write_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

/// In a fresh (single-threaded) child: a private mount namespace, as root or through a user
/// namespace that maps our own ids, so that a tmpfs can be mounted. False where neither is allowed.
bool enter_mount_namespace() {
  if (::unshare(CLONE_NEWNS) == 0) return ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
  return write_file("/proc/self/setgroups", "deny") &&
         write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") &&
         write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
}

constexpr int NO_NAMESPACE = 77;

}  // namespace

TEST_CASE("a symlink planted at an entry's name is replaced, never written through") {
  TempDir tmp;
  TempDir outside;
  const std::string victim = outside / "victim";
  write_bytes(victim, {'k', 'e', 'e', 'p'});
  DiskCache cache(config_for(tmp.path()));
  const auto key = key_for(quant, sm90a());
  const std::string entry = tmp / DiskCache::entry_name(key, quant, sm90a());
  REQUIRE(::symlink(victim.c_str(), entry.c_str()) == 0);

  cache.store(key, module_for(quant, sm90a()));
  CHECK(read_text(victim) == "keep");
  CHECK(is_regular(entry));
  CHECK(cache.load(key, quant, sm90a()).has_value());
  CHECK(cache.counters().store_failures == 0);
}

TEST_CASE("a symlink judged bad is removed only while it is still a symlink, never a good entry renamed over it") {
  TempDir tmp;
  const auto key = key_for(quant, sm90a());
  const std::string name = DiskCache::entry_name(key, quant, sm90a());
  const detail::UniqueFd dir(::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir);
  const auto plant_symlink = [&] { REQUIRE(::symlink("/nonexistent", (tmp / name).c_str()) == 0); };

  plant_symlink();
  const detail::EntryRead read = detail::read_entry_file(dir.get(), name, key, std::uint64_t{1} << 30, 0);
  REQUIRE(read.result == detail::EntryRead::Result::bad);
  // Another process renames its good entry into place between the read and the removal.
  const auto good = encode_entry(key, module_for(quant, sm90a()), "13.0", 0);
  write_bytes(tmp / "fresh", good);
  REQUIRE(::rename((tmp / "fresh").c_str(), (tmp / name).c_str()) == 0);
  detail::remove_bad_entry(dir.get(), name, read);
  CHECK(is_regular(tmp / name));

  // The symlink itself, still there, is removed.
  REQUIRE(::unlink((tmp / name).c_str()) == 0);
  plant_symlink();
  detail::remove_bad_entry(dir.get(), name, read);
  CHECK_FALSE(exists(tmp / name));
}

TEST_CASE("a cache folder swapped for another one under a running cache is not followed") {
  // Why: kiln opened the folder once; a process that renames it away and puts its own folder, with
  // a well-formed entry for our key, at the same path must not get that entry loaded.
  TempDir tmp;
  const std::string dir = tmp / "cache";
  const std::string moved = tmp / "moved";
  DiskCache cache(config_for(dir));
  REQUIRE(cache.status().mode == DiskCacheMode::read_write);
  const auto key = key_for(quant, sm90a());
  REQUIRE(::rename(dir.c_str(), moved.c_str()) == 0);
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  auto planted = module_for(quant, sm90a());
  planted.log = "planted";
  write_bytes(dir + "/" + DiskCache::entry_name(key, quant, sm90a()), encode_entry(key, planted, "13.0", 0));

  CHECK_FALSE(cache.load(key, quant, sm90a()).has_value());
  int calls = 0;
  const auto result = cache.load_or_compile(key, quant, sm90a(), compile_of(quant, sm90a(), calls));
  CHECK(result.module.log != "planted");
  CHECK(calls == 1);
  // What kiln wrote went into the folder it opened, wherever that is now.
  CHECK(exists(moved + "/" + DiskCache::entry_name(key, quant, sm90a())));
  CHECK(names_in(dir).size() == 1);
}

TEST_CASE("module and target names cannot leave the cache folder") {
  TempDir parent;
  const std::string dir = parent / "cache";
  DiskCache cache(config_for(dir));
  const std::vector<std::string> hostile = {"../escape", "../../etc/passwd", "a/b", "/abs", ".", "..", "x\ny",
                                            std::string(300, 'm'), "dot.ted.name"};
  int calls = 0;
  for (const auto& module : hostile) {
    CAPTURE(module);
    const auto key = key_for(module, sm90a());
    const auto name = DiskCache::entry_name(key, module, sm90a());
    CHECK(name.find('/') == std::string::npos);
    CHECK(name.size() < 256);
    CHECK_NOTHROW(cache.load_or_compile(key, module, sm90a(), compile_of(module, sm90a(), calls)));
    if (module.find('\n') == std::string::npos) {
      // Stored under its sanitised name, and found again under the real one.
      CHECK(is_regular(dir + "/" + name));
      CHECK(cache.load(key, module, sm90a()).has_value());
    }
  }
  CHECK(names_in(parent.path()) == std::vector<std::string>{"cache"});
  for (const auto& name : names_in(dir)) CHECK(name.find("..") == std::string::npos);
  // A name with a newline cannot be written into an entry's meta lines: a store failure, not a throw.
  CHECK(cache.counters().store_failures == 1);
}

TEST_CASE("an entry larger than the cache bound is refused without being read, and not judged bad") {
  TempDir tmp;
  const std::uint64_t bound = 1 << 20;
  DiskCache cache(config_for(tmp.path(), bound));
  const auto key = key_for(quant, sm90a());
  const std::string entry = tmp / DiskCache::entry_name(key, quant, sm90a());
  // A sparse 64 GiB file: reading it would take minutes and all memory.
  const int fd = ::open(entry.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const bool sized = ::ftruncate(fd, off_t{64} << 30) == 0;
  ::close(fd);
  if (!sized) {
    WARN("this filesystem refuses a 64 GiB sparse file; not tested here");
    return;
  }
  WarningCounter warnings;
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(cache.load(key, quant, sm90a()).has_value());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  // Not read, so not known to be bad: a process with a larger bound may have written it. A miss,
  // not healed, not warned about (it was: corrupt_healed 1, deleted, one warning).
  CHECK(cache.counters().corrupt_healed == 0);
  CHECK(cache.counters().disk_misses == 1);
  CHECK(exists(entry));
  CHECK(warnings.count() == 0);
  const auto report = cache.verify();
  REQUIRE(report.skipped.size() == 1);
  CHECK_THAT(report.skipped[0].reason, Catch::Contains("more than this process's cache bound"));
  // It goes as what it is here, an eviction: the next store's pass removes it, least recent first.
  const timespec long_ago[2] = {{std::time(nullptr) - 3600, 0}, {std::time(nullptr) - 3600, 0}};
  REQUIRE(::utimensat(AT_FDCWD, entry.c_str(), long_ago, AT_SYMLINK_NOFOLLOW) == 0);
  cache.store(key_for("small", sm90a()), module_for("small", sm90a()));
  CHECK_FALSE(exists(entry));
  CHECK(cache.counters().evictions == 1);
  CHECK(cache.counters().corrupt_healed == 0);
  CHECK(cache.load(key_for("small", sm90a()), "small", sm90a()).has_value());
}

TEST_CASE("a symlink to a folder writable by others is refused like the folder itself") {
  TempDir tmp;
  const std::string open_folder = tmp / "open";
  REQUIRE(::mkdir(open_folder.c_str(), 0700) == 0);
  REQUIRE(::chmod(open_folder.c_str(), 01777) == 0);  // as /tmp: sticky and world-writable
  REQUIRE(::symlink(open_folder.c_str(), (tmp / "link").c_str()) == 0);
  WarningCounter warnings;
  DiskCache cache(config_for(tmp / "link"));
  CHECK(cache.status().mode == DiskCacheMode::memory_only);
  CHECK_THAT(cache.status().reason, Catch::Contains("writable by group or others (mode 1777)"));
  CHECK(warnings.count() == 1);
  int calls = 0;
  const auto key = key_for(quant, sm90a());
  cache.load_or_compile(key, quant, sm90a(), compile_of(quant, sm90a(), calls));
  CHECK(calls == 1);
  CHECK(names_in(open_folder).empty());
}

TEST_CASE("a full disk (a 256 KiB tmpfs) fails stores with one warning and keeps serving from memory") {
  TempDir tmp;
  const std::string dir = tmp / "small";
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (!enter_mount_namespace()) ::_exit(NO_NAMESPACE);
    if (::mount("kiln-test", dir.c_str(), "tmpfs", 0, "size=256k,mode=0700") != 0) ::_exit(NO_NAMESPACE);
    int failures = 0;
    {
      DiskCache cache(config_for(dir));
      if (cache.status().mode != DiskCacheMode::read_write) ::_exit(81);
      WarningCounter warnings;
      int calls = 0;
      // 8 entries of 64 KiB into 256 KiB: the first few fit, the rest meet ENOSPC.
      for (int i = 0; i < 8; ++i) {
        const std::string m = "m" + std::to_string(i);
        const auto result = cache.load_or_compile(key_for(m, sm90a()), m, sm90a(),
                                                  compile_of(m, sm90a(), calls, 64 * 1024));
        if (result.module.cubin.size() != 64 * 1024) failures |= 1;
      }
      if (calls != 8) failures |= 2;
      const auto counts = cache.counters();
      if (counts.store_failures == 0 || counts.store_failures == 8) failures |= 4;
      if (warnings.count() != 1) failures |= 8;
      if (warnings.all().find("No space left on device") == std::string::npos) failures |= 16;
      if (cache.stats().temp_files != 0) failures |= 32;  // a failed write removes its temporary file
      // What did fit is still served from disk.
      if (!cache.load(key_for("m0", sm90a()), "m0", sm90a())) failures |= 64;
    }
    ::_exit(failures);
  }
  const int code = wait_exit_code(child);
  if (code == NO_NAMESPACE) {
    WARN("no mount namespace here (unshare refused): the full-disk case is covered by RLIMIT_FSIZE only");
    return;
  }
  CHECK(code == 0);
}

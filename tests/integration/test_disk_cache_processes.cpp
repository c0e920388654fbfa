// The disk cache shared at once: threads of one process on one cache, and fork()ed processes on
// one folder.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache_test_support.hpp"

using namespace kiln;
using namespace kiln::test;
using namespace std::chrono_literals;

namespace {

/// Appends one line with a single write(2), which O_APPEND keeps whole across processes.
void append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) ::_exit(90);
  const std::string text = line + "\n";
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) ::_exit(91);
  ::close(fd);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int wait_exit_code(pid_t child) {
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

std::vector<std::string> temp_files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& item : std::filesystem::directory_iterator(dir))
    if (item.path().extension() == ".tmp") names.push_back(item.path().string());
  return names;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

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
          // Why a fixed time: a slow compile widens the window in which the others find the key
          // locked; no check depends on how many do, so there is no event to wait for.
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

TEST_CASE("16 processes started together on an empty folder compile each module exactly once") {
  TempDir tmp;
  const std::string dir = tmp / "cache";
  const std::string compile_log = tmp / "compiles.log";
  const std::string outcome_log = tmp / "outcomes.log";
  const std::vector<std::string> modules = {"alpha", "beta", "gamma"};
  constexpr int processes = 16;

  int barrier[2];
  REQUIRE(::pipe(barrier) == 0);
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(barrier[1]);
      char byte;
      if (::read(barrier[0], &byte, 1) != 0) ::_exit(80);  // released when the parent closes its end
      int failures = 0;
      {
        DiskCache cache(config_for(dir));
        if (cache.status().mode != DiskCacheMode::read_write) ::_exit(81);
        for (std::size_t i = 0; i < modules.size(); ++i) {
          const std::string& m = modules[(i + p) % modules.size()];
          const auto result = cache.load_or_compile(key_for(m, sm90a()), m, sm90a(), [&] {
            append_line(compile_log, m);
            // Why a fixed time: a slow compile widens the window in which the others find the lock
            // held; no check depends on how many do, so there is no event to wait for.
            std::this_thread::sleep_for(100ms);
            return module_for(m, sm90a(), 50000);
          });
          if (!same_module(result.module, module_for(m, sm90a(), 50000))) failures |= 1;
          append_line(outcome_log, std::string(to_string(result.outcome)));
        }
        const auto counts = cache.counters();
        if (counts.disk_hits + counts.disk_misses != modules.size()) failures |= 2;
        if (counts.compiles != counts.disk_misses) failures |= 4;
        if (counts.corrupt_healed != 0 || counts.lock_timeouts != 0 || counts.lock_failures != 0) failures |= 8;
      }
      ::_exit(failures);
    }
    children.push_back(child);
  }
  ::close(barrier[0]);
  ::close(barrier[1]);
  for (const pid_t child : children) CHECK(wait_exit_code(child) == 0);

  std::map<std::string, int> compiled;
  for (const auto& line : lines_of(compile_log)) ++compiled[line];
  for (const auto& m : modules) {
    CAPTURE(m);
    CHECK(compiled[m] == 1);
  }
  CHECK(compiled.size() == modules.size());
  std::map<std::string, int> outcomes;
  for (const auto& line : lines_of(outcome_log)) ++outcomes[line];
  CHECK(outcomes["compiled"] == 3);
  CHECK(outcomes["hit"] + outcomes["hit after wait"] == processes * 3 - 3);
  CHECK(outcomes["compiled without lock"] == 0);

  DiskCache cache(config_for(dir));
  const auto report = cache.verify();
  CHECK(report.good == 3);
  CHECK(report.bad.empty());
  CHECK(cache.stats().temp_files == 0);
}

TEST_CASE("a writer killed with SIGKILL mid-write leaves nothing a reader accepts") {
  TempDir tmp;
  const auto key = key_for("huge", sm90a());
  // Why this big: the write must last long enough (tens of ms) for the parent to catch it.
  constexpr std::size_t huge = 64u << 20;
  int caught = 0;
  for (int attempt = 0; attempt < 5 && caught == 0; ++attempt) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      DiskCache cache(config_for(tmp.path()));
      cache.store(key, module_for("huge", sm90a(), huge));
      ::_exit(0);
    }
    bool killed = false;
    const auto start = std::chrono::steady_clock::now();
    while (!killed && ms_since(start) < 20000) {
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) break;  // finished before we caught it
      // Any file, not only temporaries: a writer that wrote in place would be caught mid-write too.
      for (const auto& item : std::filesystem::directory_iterator(tmp.path())) {
        struct stat info {};
        if (::stat(item.path().c_str(), &info) == 0 && info.st_size > 0) {
          ::kill(child, SIGKILL);
          killed = true;
          break;
        }
      }
    }
    if (killed) {
      CHECK(wait_exit_code(child) == 1000 + SIGKILL);
    }
    DiskCache reader(config_for(tmp.path()));
    CHECK(reader.verify().bad.empty());  // no partial file under an entry's name
    const auto loaded = reader.load(key, "huge", sm90a());
    if (killed && !temp_files_in(tmp.path()).empty()) {
      ++caught;
      CHECK(reader.stats().temp_files == 1);
      // A killed writer never renamed: there is no entry, and nothing is accepted.
      CHECK(reader.stats().entries == 0);
      CHECK_FALSE(loaded.has_value());
    } else if (loaded) {
      CHECK(same_module(*loaded, module_for("huge", sm90a(), huge)));  // whole or nothing
    }
    CHECK(reader.counters().corrupt_healed == 0);
    reader.clear();
  }
  CHECK(caught >= 1);
}

TEST_CASE("a live lock holder times out its waiters; a killed one releases them at once") {
  TempDir tmp;
  const auto key = key_for("slow", sm90a());
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    ::close(ready[0]);
    DiskCache cache(config_for(tmp.path()));
    cache.load_or_compile(key, "slow", sm90a(), [&]() -> CompiledModule {
      if (::write(ready[1], "x", 1) != 1) ::_exit(70);
      for (;;) ::pause();  // holds the lock until killed
    });
    ::_exit(71);
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);

  {  // live holder: wait for the timeout, then compile without the lock
    DiskCache cache(config_for(tmp.path(), std::uint64_t{1} << 30, 300ms));
    const auto start = std::chrono::steady_clock::now();
    const auto result = cache.load_or_compile(key, "slow", sm90a(), [] { return module_for("slow", sm90a()); });
    const double waited = ms_since(start);
    CHECK(result.outcome == CacheOutcome::compiled_without_lock);
    CHECK(waited >= 300);
    CHECK(waited < 3000);
    CHECK(cache.counters().lock_timeouts == 1);
    CHECK(cache.counters().lock_waits == 1);
    cache.evict(key, "slow", sm90a());  // so the next process must compile, and lock, again
  }

  REQUIRE(::kill(holder, SIGKILL) == 0);
  CHECK(wait_exit_code(holder) == 1000 + SIGKILL);
  {  // holder dead: the kernel dropped its flock, so the lock is free well before the timeout
    DiskCache cache(config_for(tmp.path(), std::uint64_t{1} << 30, 20s));
    const auto start = std::chrono::steady_clock::now();
    const auto result = cache.load_or_compile(key, "slow", sm90a(), [] { return module_for("slow", sm90a()); });
    CHECK(ms_since(start) < 2000);
    CHECK(result.outcome == CacheOutcome::compiled);
    CHECK(cache.counters().lock_waits == 0);
    CHECK(cache.counters().lock_timeouts == 0);
    CHECK(cache.verify().good == 1);
  }
}

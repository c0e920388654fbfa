#pragma once
// Progress of a long command (kiln pack, kiln warm) on a terminal: done/total, the current module
// and target, elapsed time, compiles vs cache hits, on one rewritten stderr line. Silent when
// stderr is not a terminal or the command prints JSON, so logs and pipes stay clean.

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

namespace kiln::cli {

class Progress {
 public:
  /// Shown only when `allowed` (not --json) and stderr is a terminal.
  Progress(std::string label, std::size_t total, bool allowed);
  bool shown() const noexcept { return shown_; }
  /// A module begins (shown as current).
  void start(const std::string& module, const std::string& target);
  /// One finished: from a cache, compiled, or failed. Thread-safe.
  void finish(bool from_cache, bool failed);
  /// Ends the line (once, after the last finish).
  void end();
  /// Finished so far: from a cache, and compiled (neither cached nor failed).
  std::size_t cached() const noexcept { return cached_; }
  std::size_t compiled() const noexcept { return done_ - cached_ - failed_; }

 private:
  void draw();  // with mutex_ held

  std::string label_;
  std::size_t total_ = 0, done_ = 0, cached_ = 0, failed_ = 0;
  std::string current_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
};

}  // namespace kiln::cli

#include "cli_progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace kiln::cli {

Progress::Progress(std::string label, std::size_t total, bool allowed)
    : label_(std::move(label)), total_(total), shown_(allowed && ::isatty(STDERR_FILENO) == 1) {}

void Progress::start(const std::string& module, const std::string& target) {
  if (!shown_) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  current_ = module + " " + target;
  draw();
}

void Progress::finish(bool from_cache, bool failed) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++done_;
  if (failed)
    ++failed_;
  else if (from_cache)
    ++cached_;
  if (shown_) draw();
}

void Progress::end() {
  if (shown_) std::fprintf(stderr, "\n");
}

void Progress::draw() {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r%s [%zu/%zu] %.1f s, %zu compiled, %zu from caches%s%s  %s\033[K", label_.c_str(), done_,
               total_, elapsed, done_ - cached_ - failed_, cached_, failed_ != 0 ? ", failed " : "",
               failed_ != 0 ? std::to_string(failed_).c_str() : "", current_.c_str());
  std::fflush(stderr);
}

}  // namespace kiln::cli

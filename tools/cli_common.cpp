#include "cli_common.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "kiln/error.hpp"
#include "kiln/nvrtc.hpp"

namespace kiln::cli {

std::vector<Target> requested_targets(const std::string& arch) {
  const auto archs = nvrtc_supported_archs();
  if (arch == "all") {
    if (archs.empty()) throw_error("--arch all: NVRTC reported no supported archs");
    return nvrtc_targets(archs);
  }
  if (arch == "auto") return {auto_target()};
  return {parse_supported_target(arch, archs, "--arch")};
}

void parallel_for(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> next{0};
  const auto drain = [&] {
    for (std::size_t i; (i = next++) < count;) work(i);
  };
  std::vector<std::thread> workers;
  for (unsigned t = 1; t < std::min<std::size_t>(threads, count); ++t) workers.emplace_back(drain);
  drain();
  for (auto& worker : workers) worker.join();
}

}  // namespace kiln::cli

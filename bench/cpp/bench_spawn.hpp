#pragma once
// Running this program again as a fresh process, for the JIT measurements that must start cold.

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::bench {

struct ChildRun {
  int exit_status = -1;  ///< the child's exit status; -1 when it did not exit normally
  std::string output;    ///< everything it wrote to stdout
  double wall_ms = 0;    ///< from just before the spawn to the child's exit
};

/// Runs this executable (/proc/self/exe) with `args` followed by `--spawned-at <ns>`, where <ns>
/// is CLOCK_MONOTONIC taken just before posix_spawn, with exactly the environment `env`
/// (NAME=VALUE strings). Captures stdout; stderr is shared with this process. Throws kiln::Error
/// when the process cannot be started or waited for.
ChildRun run_self(const std::vector<std::string>& args, const std::vector<std::string>& env);

/// This process's environment without `drop` (names), plus `add` (NAME=VALUE strings).
std::vector<std::string> child_environment(const std::vector<std::string>& drop, const std::vector<std::string>& add);

}  // namespace kiln::bench

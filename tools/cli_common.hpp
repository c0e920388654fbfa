#pragma once
// Pieces several subcommands share.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "driver/cuda_backend.hpp"
#include "jit/target_select.hpp"
#include "kiln/service.hpp"

namespace kiln::cli {

/// `--arch`: a target name, `auto` (auto_target: KILN_ARCH, else the GPU's, else sm_90a) or `all`
/// (every arch NVRTC knows). Throws kiln::Error naming `--arch` on anything else.
std::vector<Target> requested_targets(const std::string& arch);

/// Runs `work(i)` for every i in [0, count) on up to `threads` threads (this one included).
/// `work` must not throw.
void parallel_for(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& work);

/// This process's counters as one JSON object (`kiln warm --json`, `kiln info --json`): the memory
/// caches' (summed over the services the command used) and the disk cache's.
nlohmann::json counters_json(const ServiceCounters& counters);

}  // namespace kiln::cli

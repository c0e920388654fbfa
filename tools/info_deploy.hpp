#pragma once
// What `kiln info` says about deployment without a compiler: which NVRTC was found (without
// loading it when KILN_JIT=off or there is none), KILN_JIT, and the layered cache path.

#include <nlohmann/json.hpp>

namespace kiln::cli {

/// {"found", "path", "source", "build", "loaded", "load_error", "jit", "meaning"}.
nlohmann::json nvrtc_found_json();
/// {"spec", "writable", "layers": [{path, kind, usable, state, entries, per_target, nvrtc, signature, hits, bad_entries}]}.
nlohmann::json cache_path_json();
/// The text lines of both, for `kiln info`; `target` names the device's (or default) target, whose
/// entries each layer counts.
void print_deploy_info(const nlohmann::json& info, const std::string& target);

}  // namespace kiln::cli

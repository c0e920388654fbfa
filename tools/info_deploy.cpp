#include "info_deploy.hpp"

#include <cstdio>

#include "cache/cache_path.hpp"
#include "runtime/module_provider.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"

namespace kiln::cli {

nlohmann::json nvrtc_found_json() {
  const auto& location = nvrtc_location();
  const bool jit = jit_enabled();
  nlohmann::json out = {{"found", location.has_value()}, {"jit", jit}, {"build", nvrtc_build()},
                        {"loaded", nvrtc_load_attempted() && nvrtc_api().loaded}};
  out["path"] = location ? location->path : "";
  out["source"] = location ? location->source : "";
  if (!location) {
    out["meaning"] = "no NVRTC (" + nvrtc_absence() + "): kernels come only from bundles (matched by the NVRTC build "
                     "they record); anything else is unavailable (handle 0)";
  } else if (!jit) {
    out["meaning"] = "KILN_JIT=off: NVRTC is never loaded; kernels come only from the cache layers";
  } else {
    out["meaning"] = "compiles on a miss (loaded on first need)";
  }
  if (nvrtc_load_attempted() && !nvrtc_api().loaded) out["load_error"] = nvrtc_api().load_error;
  return out;
}

nlohmann::json cache_path_json() {
  const CachePath& path = process_cache_path();
  auto layers = nlohmann::json::array();
  for (const auto& layer : path.layers) {
    const LayerReport report = layer->report();
    layers.push_back({{"path", report.path},       {"kind", report.kind},         {"usable", report.usable},
                      {"state", report.state},     {"entries", report.entries},   {"per_target", report.per_target},
                      {"nvrtc", report.nvrtc_build}, {"signature", report.signature}, {"hits", report.hits},
                      {"bad_entries", report.bad_entries}});
  }
  const auto status = process_disk_cache()->status();
  return {{"spec", path.spec},
          {"writable", status.dir},
          {"writable_mode", std::string(to_string(status.mode))},
          {"key_error", path.key_error},
          {"layers", layers}};
}

void print_deploy_info(const nlohmann::json& info, const std::string& target) {
  const auto& nvrtc = info["nvrtc_found"];
  if (nvrtc["found"].get<bool>())
    std::printf("NVRTC found: %s (%s), %s\n", nvrtc["path"].get<std::string>().c_str(),
                nvrtc["source"].get<std::string>().c_str(), nvrtc["build"].get<std::string>().c_str());
  std::printf("JIT: %s; %s\n", nvrtc["jit"].get<bool>() ? "on" : "off", nvrtc["meaning"].get<std::string>().c_str());
  const auto& path = info["cache_path"];
  if (path["spec"].get<std::string>().empty()) return;
  std::printf("KILN_CACHE_PATH=%s\n", path["spec"].get<std::string>().c_str());
  if (!path["key_error"].get<std::string>().empty())
    std::printf("  bundles not used: %s\n", path["key_error"].get<std::string>().c_str());
  for (const auto& layer : path["layers"]) {
    const auto& per_target = layer["per_target"];
    const unsigned long long here =
        per_target.contains(target) ? per_target[target].get<unsigned long long>() : 0ULL;
    std::printf("  %s %s: %s", layer["kind"].get<std::string>().c_str(), layer["path"].get<std::string>().c_str(),
                layer["state"].get<std::string>().c_str());
    if (layer["usable"].get<bool>())
      std::printf(", %llu entries, %llu for %s%s%s", layer["entries"].get<unsigned long long>(), here, target.c_str(),
                  layer["kind"] == "bundle" ? ", NVRTC " : "",
                  layer["kind"] == "bundle" ? (layer["nvrtc"].get<std::string>() +
                                               (layer["nvrtc"] == nvrtc["build"] || nvrtc["build"] == ""
                                                    ? ""
                                                    : " (not this NVRTC: its entries will not match)") +
                                               ", " + layer["signature"].get<std::string>())
                                                  .c_str()
                                            : "");
    std::printf("\n");
  }
  std::printf("  writable: %s (%s)\n", path["writable"].get<std::string>().empty() ? "none" : path["writable"].get<std::string>().c_str(),
              path["writable_mode"].get<std::string>().c_str());
}

}  // namespace kiln::cli

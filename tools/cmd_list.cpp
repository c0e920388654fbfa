// kiln list: the embedded kernel registry.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "jit/registry.hpp"

namespace kiln::cli {

void add_list_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("list", "List the embedded kernel modules: family, entry points, source hash");
  auto* json = cmd->add_flag("--json", "Print JSON instead of a table");
  cmd->callback([json] {
    if (*json) {
      auto modules = nlohmann::json::array();
      for (const auto& source : embedded_modules())
        modules.push_back({{"module", source.module}, {"family", source.family}, {"entries", source.entries},
                           {"bytes", source.text.size()}, {"sha256", source.sha256}});
      auto headers = nlohmann::json::array();
      for (const auto& header : embedded_headers())
        headers.push_back({{"name", header.name}, {"bytes", header.text.size()}});
      std::printf("%s\n", nlohmann::json{{"modules", modules}, {"headers", headers}}.dump(2).c_str());
      return;
    }
    std::printf("%-28s %-7s %7s  %-16s %s\n", "module", "family", "bytes", "sha256", "entries");
    for (const auto& source : embedded_modules()) {
      std::string entries;
      for (const auto& entry : source.entries) entries += (entries.empty() ? "" : ", ") + entry;
      std::printf("%-28s %-7s %7zu  %-16.16s %s\n", source.module.c_str(), source.family.c_str(),
                  source.text.size(), source.sha256.c_str(), entries.c_str());
    }
    for (const auto& header : embedded_headers())
      std::printf("%-28s %-7s %7zu  (header)\n", header.name.c_str(), "", header.text.size());
  });
}

}  // namespace kiln::cli

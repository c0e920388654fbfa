// kiln list: the embedded kernel registry, the variant families with their parameters, and (with
// --variants) every variant by the name the cache, the dumps and manifests use.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "jit/registry.hpp"
#include "jit/variants.hpp"

namespace kiln::cli {

namespace {

std::string joined(const std::vector<std::string>& values, const char* separator) {
  std::string text;
  for (const auto& value : values) text += (text.empty() ? "" : separator) + value;
  return text;
}

nlohmann::json families_json(bool with_variants) {
  auto families = nlohmann::json::array();
  for (const auto& family : variant_families()) {
    auto parameters = nlohmann::json::array();
    for (const auto& parameter : family.parameters)
      parameters.push_back({{"name", parameter.name}, {"values", parameter.values}, {"default", parameter.default_value},
                            {"define", parameter.define}, {"description", parameter.description}});
    const auto variants = all_variants(family);
    nlohmann::json entry = {{"module", family.module}, {"description", family.description},
                            {"parameters", parameters}, {"variant_count", variants.size()}};
    if (with_variants) {
      auto names = nlohmann::json::array();
      for (const auto& variant : variants) names.push_back(variant.name());
      entry["variants"] = names;
    }
    families.push_back(entry);
  }
  return families;
}

void print_families(bool with_variants) {
  for (const auto& family : variant_families()) {
    const auto variants = all_variants(family);
    std::printf("\nvariant family %s: %s; %zu variants, each compiled on first use\n", family.module.c_str(),
                family.description.c_str(), variants.size());
    for (const auto& parameter : family.parameters)
      std::printf("  %-7s %-28s default %-5s %s\n", parameter.name.c_str(), joined(parameter.values, "|").c_str(),
                  parameter.default_value.c_str(), parameter.description.c_str());
    if (with_variants)
      for (const auto& variant : variants) std::printf("  %s\n", variant.name().c_str());
  }
}

}  // namespace

void add_list_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "list", "List the embedded kernel modules and the variant families with their parameters and allowed values");
  auto* json = cmd->add_flag("--json", "Print JSON instead of a table");
  auto* variants = cmd->add_flag("--variants", "Also list every variant's name (what manifests and the cache use)");
  cmd->callback([json, variants] {
    const bool with_variants = variants->count() > 0;
    if (*json) {
      auto modules = nlohmann::json::array();
      for (const auto& source : embedded_modules())
        modules.push_back({{"module", source.module}, {"family", source.family}, {"entries", source.entries},
                           {"bytes", source.text.size()}, {"sha256", source.sha256}});
      auto headers = nlohmann::json::array();
      for (const auto& header : embedded_headers())
        headers.push_back({{"name", header.name}, {"bytes", header.text.size()}});
      std::printf("%s\n", nlohmann::json{{"modules", modules}, {"headers", headers},
                                         {"variant_families", families_json(with_variants)}}
                              .dump(2)
                              .c_str());
      return;
    }
    std::printf("%-28s %-7s %7s  %-16s %s\n", "module", "family", "bytes", "sha256", "entries");
    for (const auto& source : embedded_modules())
      std::printf("%-28s %-7s %7zu  %-16.16s %s\n", source.module.c_str(), source.family.c_str(), source.text.size(),
                  source.sha256.c_str(), joined(source.entries, ", ").c_str());
    for (const auto& header : embedded_headers())
      std::printf("%-28s %-7s %7zu  (header)\n", header.name.c_str(), "", header.text.size());
    print_families(with_variants);
  });
}

}  // namespace kiln::cli

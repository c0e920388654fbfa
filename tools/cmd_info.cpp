// kiln info: what this machine offers kiln (NVRTC, driver, GPUs, levers).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "kiln/ops/fp8_act_quant_floor.hpp"
#include "kiln/registry.hpp"
#include "kiln/version.hpp"

namespace kiln::cli {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show NVRTC, driver, GPUs, targets and levers");
  auto* json = cmd->add_flag("--json", "Print JSON");
  cmd->callback([json] {
    nlohmann::json out{{"kiln", std::string(version_string())},
                       {"modules", embedded_modules().size()},
                       {"levers", {{"KILN_FP8_ACT_QUANT_HOPPER", ops::fp8_act_quant_hopper_enabled()}}}};
    if (*json) {
      std::printf("%s\n", out.dump(2).c_str());
      return;
    }
    std::printf("kiln %s, %zu embedded modules\n", std::string(version_string()).c_str(), embedded_modules().size());
    std::printf("levers: KILN_FP8_ACT_QUANT_HOPPER=%d\n", ops::fp8_act_quant_hopper_enabled() ? 1 : 0);
  });
}

}  // namespace kiln::cli

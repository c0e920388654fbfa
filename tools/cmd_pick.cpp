// kiln pick: explain which FP8 quantizer kernel a shape launches, on which grid, and why.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::cli {

namespace {

std::string grid_text(const std::array<std::uint32_t, 3>& grid) {
  return "(" + std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " + std::to_string(grid[2]) + ")";
}

struct PickArgs {
  std::uint32_t m = 0;
  std::uint32_t k = 0;
  std::uint32_t sm_count = 132;
  std::string twin = "auto";
  bool no_twin_kernel = false;
  bool json = false;
};

void print_pick(const PickArgs& args) {
  const bool requested = args.twin == "auto" ? ops::fp8_act_quant_hopper_enabled() : args.twin == "on";
  // Why placeholder handles: `pick` explains the rule without a GPU; 1 and 2 stand for "loaded".
  const ops::Fp8ActQuant quant(KernelHandle{1}, args.no_twin_kernel ? KernelHandle{} : KernelHandle{2}, args.sm_count);
  const auto chosen = quant.pick_with(requested, args.m, args.k, args.sm_count);
  const auto other_grid = ops::fp8_quant_grid(!chosen.twin, args.m, args.k);
  const std::string kernel(chosen.twin ? ops::FP8_QUANT_HOPPER_ENTRY : ops::FP8_QUANT_ENTRY);
  const std::string reason = chosen.reject ? std::string(ops::to_string(*chosen.reject)) : "";
  const auto ctas = ops::fp8_quant_hopper_ctas(args.m, args.k);
  const auto floor = ops::fp8_quant_min_ctas(args.sm_count);
  if (args.json) {
    nlohmann::json out{{"m", args.m}, {"k", args.k}, {"sm_count", args.sm_count}, {"requested", requested},
                       {"twin", chosen.twin}, {"kernel", kernel}, {"grid", chosen.grid},
                       {"block", {128, 1, 1}}, {"twin_ctas", ctas}, {"min_ctas", floor},
                       {"twin_min_m", ops::fp8_quant_hopper_min_m(args.k, args.sm_count)}};
    out["reject"] = chosen.reject ? nlohmann::json(reason) : nlohmann::json(nullptr);
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("m=%u k=%u sm_count=%u lever=%s\n", args.m, args.k, args.sm_count, requested ? "on" : "off");
  std::printf("kernel: %s\ngrid:   %s  block (128, 1, 1)\n", kernel.c_str(), grid_text(chosen.grid).c_str());
  if (chosen.twin)
    std::printf("why:    the twin's %llu CTAs reach the floor of %llu (%g per SM x %u SMs)\n",
                static_cast<unsigned long long>(ctas), static_cast<unsigned long long>(floor),
                ops::FP8_QUANT_MIN_CTAS_PER_SM, args.sm_count);
  else
    std::printf("why not the twin: %s (twin grid %s = %llu CTAs, floor %llu; smallest M at this K: %u)\n",
                reason.c_str(), grid_text(other_grid).c_str(), static_cast<unsigned long long>(ctas),
                static_cast<unsigned long long>(floor), ops::fp8_quant_hopper_min_m(args.k, args.sm_count));
}

}  // namespace

void add_pick_command(CLI::App& app) {
  auto args = std::make_shared<PickArgs>();
  auto* cmd = app.add_subcommand("pick", "Explain which FP8 quantizer kernel an (M, K) launches and why");
  cmd->add_option("--m", args->m, "Rows (tokens)")->required();
  cmd->add_option("--k", args->k, "Columns (hidden size); a multiple of 128")->required();
  cmd->add_option("--sm-count", args->sm_count, "SM count of the device (default: 132, the H200)");
  cmd->add_option("--twin", args->twin, "Lever: on, off, or auto (KILN_FP8_ACT_QUANT_HOPPER)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  cmd->add_flag("--no-twin-kernel", args->no_twin_kernel, "Pretend the image lacks the Hopper twin");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args] {
    if (args->k % ops::FP8_QUANT_GROUP != 0)
      throw CLI::ValidationError("--k", "expected a multiple of 128, got " + std::to_string(args->k));
    print_pick(*args);
  });
}

}  // namespace kiln::cli

// kiln pick: explain which quantizer kernel a shape launches, on which grid, and why: the seed's
// pick (shared kernel or Hopper twin), or with --variant a family variant's (shipped kernel or its
// one-group kernel).
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "commands.hpp"
#include "jit/variants.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"

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
  std::string variant;
  std::string one_group = "auto";
  bool json = false;
};

// The family variant `text` names (either spelling of `kiln warm`'s manifests); a usage error
// otherwise, as every bad option value is.
ops::QuantVariant quant_variant_named(const std::string& text) {
  const std::string name = variant_from_option("--variant", text).name();
  for (const ops::QuantVariant& variant : ops::every_quant_variant())
    if (variant.module_name() == name) return variant;
  throw CLI::ValidationError("--variant", "expected a variant of the quantizer family (`kiln list --variants`), got '" +
                                              text + "' (" + name + ")");
}

/// `--k` against the kernel that will run: a multiple of the variant's group (32, 64 or 128), or of
/// 128 for the seed's kernels. Why here and not in --k's own check: the group is known only once
/// --variant is read.
void check_k(std::uint32_t k, std::uint32_t group, const std::string& whose) {
  const std::uint64_t largest = (std::uint64_t{UINT32_MAX} / group) * group;
  if (k == 0 || k % group != 0)
    throw CLI::ValidationError("--k", "expected a multiple of " + std::to_string(group) + whose + " in " +
                                          std::to_string(group) + ".." + std::to_string(largest) + ", got '" +
                                          std::to_string(k) + "'");
}

void print_variant_pick(const PickArgs& args, const ops::QuantVariant& variant) {
  const bool requested = args.one_group == "auto" ? ops::quant_one_group_lever() : args.one_group == "on";
  ops::QuantArgs shape;
  // Why stand-in pointers: check() reads only their alignment, and the pick needs no memory.
  alignas(16) static unsigned char stand_in[16];
  shape.x = shape.q = shape.scales = stand_in;
  shape.m = args.m;
  shape.k = args.k;
  // Why: a shape launch() refuses is refused here with launch()'s error, never shown as a grid.
  ops::GroupQuant::check(variant, shape);
  const ops::QuantSlotPick chosen = ops::GroupQuant::pick_with(variant, requested, args.m, args.k, args.sm_count);
  const bool two_kernels = ops::GroupQuant::items_per_slot(variant) == 2;
  const std::string kernel(chosen.one_group ? ops::QUANT_ONE_GROUP_ENTRY : ops::QUANT_ENTRY);
  const std::uint64_t one_group_ctas = ops::GroupQuant::grid(variant, args.m, args.k, 1)[0];
  const std::uint64_t ceiling = std::uint64_t{ops::QUANT_ONE_GROUP_MAX_CTAS_PER_SM} * args.sm_count;
  std::string why(ops::to_string(chosen.reason));
  // Why: the library's words name the variable, which did not decide when --one-group did.
  if (chosen.reason == ops::QuantSlotReason::lever_off && args.one_group == "off")
    why = "two groups per slot: chosen by the caller (--one-group off)";
  if (chosen.reason == ops::QuantSlotReason::small_grid || chosen.reason == ops::QuantSlotReason::large_grid)
    why += " (one-group grid " + std::to_string(one_group_ctas) + " CTAs, ceiling " + std::to_string(ceiling) +
           " = 64 x " + std::to_string(args.sm_count) + " SMs)";
  if (args.json) {
    nlohmann::json out{{"variant", variant.module_name()}, {"m", args.m}, {"k", args.k}, {"sm_count", args.sm_count},
                       {"requested", requested}, {"kernel", kernel}, {"one_group", chosen.one_group},
                       {"items", chosen.items}, {"grid", chosen.grid}, {"block", {256, 1, 1}},
                       {"two_kernels", two_kernels}, {"one_group_ctas", one_group_ctas},
                       {"max_ctas", ceiling}, {"why", why}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("variant %s m=%u k=%u sm_count=%u lever=%s\n", variant.module_name().c_str(), args.m, args.k,
              args.sm_count, requested ? "on" : "off");
  std::printf("kernel: %s (%u group%s per slot)\ngrid:   %s  block (256, 1, 1)\n", kernel.c_str(), chosen.items,
              chosen.items == 1 ? "" : "s", grid_text(chosen.grid).c_str());
  std::printf("%s %s\n", two_kernels && !chosen.one_group ? "why not the one-group kernel:" : "why:   ", why.c_str());
}

void print_pick(const PickArgs& args) {
  if (!args.variant.empty()) {
    const ops::QuantVariant variant = quant_variant_named(args.variant);
    // Why the seed's pick for its own variant: its calls run the seed kernels (the family kernel only
    // takes what they cannot: another eps, strided rows).
    if (!variant.is_seed()) {
      check_k(args.k, variant.group, " (the group of " + variant.module_name() + ")");
      return print_variant_pick(args, variant);
    }
  }
  check_k(args.k, ops::FP8_QUANT_GROUP, "");
  const bool requested = args.twin == "auto" ? ops::fp8_act_quant_hopper_enabled() : args.twin == "on";
  // Why placeholder handles: `pick` explains the rule without a GPU; 1 and 2 stand for "loaded".
  const ops::Fp8ActQuant quant(KernelHandle{1}, args.no_twin_kernel ? KernelHandle{} : KernelHandle{2}, args.sm_count);
  const auto chosen = quant.pick_with(requested, args.m, args.k, args.sm_count);
  // Why: a shape launch() refuses is refused here with launch()'s error, never shown as a grid.
  ops::fp8_quant_require_launchable(chosen, args.m, args.k);
  const bool noop = chosen.action == ops::Fp8QuantAction::noop;
  const std::string kernel(chosen.twin ? ops::FP8_QUANT_HOPPER_ENTRY : ops::FP8_QUANT_ENTRY);
  const std::string reason = chosen.reject ? std::string(ops::to_string(*chosen.reject)) : "";
  const auto ctas = ops::fp8_quant_hopper_ctas(args.m, args.k);
  const auto floor = ops::fp8_quant_min_ctas(args.sm_count);
  const auto min_m = ops::fp8_quant_hopper_min_m(args.k, args.sm_count);
  std::string why;
  if (noop)
    why = std::string(ops::to_string(chosen.action));
  else if (chosen.twin)
    why = "the twin fills the device (" + ops::fp8_quant_hopper_grid_text(args.m, args.k, args.sm_count) + ")";
  else
    why = reason + " (" + ops::fp8_quant_hopper_grid_text(args.m, args.k, args.sm_count) + "; every M >= " +
          std::to_string(min_m) + " reaches the floor at this K)";
  if (args.json) {
    nlohmann::json out{{"m", args.m}, {"k", args.k}, {"sm_count", args.sm_count}, {"requested", requested},
                       {"noop", noop}, {"twin", chosen.twin}, {"grid", chosen.grid},
                       {"block", {128, 1, 1}}, {"twin_ctas", ctas}, {"min_ctas", floor},
                       {"twin_min_m", min_m}, {"why", why}};
    out["kernel"] = noop ? nlohmann::json(nullptr) : nlohmann::json(kernel);
    out["reject"] = chosen.reject ? nlohmann::json(reason) : nlohmann::json(nullptr);
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("m=%u k=%u sm_count=%u lever=%s\n", args.m, args.k, args.sm_count, requested ? "on" : "off");
  if (noop) {
    std::printf("%s\n", why.c_str());
    return;
  }
  std::printf("kernel: %s\ngrid:   %s  block (128, 1, 1)\n", kernel.c_str(), grid_text(chosen.grid).c_str());
  std::printf("%s %s\n", chosen.twin ? "why:   " : "why not the twin:", why.c_str());
}

}  // namespace

void add_pick_command(CLI::App& app) {
  auto args = std::make_shared<PickArgs>();
  auto* cmd = app.add_subcommand("pick", "Explain which quantizer kernel an (M, K) launches and why");
  // Why these bounds: a launch takes m <= 2^31-1 and k a multiple of the group, 128 for the seed's
  // kernels (0 for either is a no-op, with nothing to pick); a device has at least one SM.
  cmd->add_option("--m", args->m, "Rows (tokens)")->required()->transform(integer_in(1, 2147483647));
  // Why only digits and the u32 range here: the multiple --k must be depends on --variant's group,
  // checked once both are read (check_k).
  cmd->add_option("--k", args->k, "Columns (hidden size); a multiple of 128, or with --variant of its group")
      ->required()
      ->transform(integer_in(0, UINT32_MAX).description("UINT, a multiple of 128 (with --variant, of its group)"));
  cmd->add_option("--sm-count", args->sm_count, "SM count of the device (default: 132, the H200)")
      ->transform(integer_in(1, 65535));
  cmd->add_option("--twin", args->twin, "Lever: on, off, or auto (KILN_FP8_ACT_QUANT_HOPPER)")
      ->check(one_of({"on", "off", "auto"}));
  cmd->add_flag("--no-twin-kernel", args->no_twin_kernel, "Pretend the image lacks the Hopper twin");
  auto* variant = cmd->add_option("--variant", args->variant,
                  "A quantizer family variant (`kiln list --variants`, or 'per_token_group_quant name=value ...'): "
                  "its pick instead of the seed's (the seed's own variant keeps the seed's)");
  cmd->add_option("--one-group", args->one_group, "With --variant, the lever: on, off, or auto (KILN_Q_ONE_GROUP)")
      ->check(one_of({"on", "off", "auto"}))
      ->needs(variant);
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args] { print_pick(*args); });
}

}  // namespace kiln::cli

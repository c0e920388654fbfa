// kiln pick: explain which quantizer kernel a call of a variant launches, on which grid, and why
// each other candidate does not (the one pick of kiln_quant), for a target and a GPU; with --seed,
// the seed quantizer's own pick (kiln_fp8_act_quant: shared kernel or Hopper twin).
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "commands.hpp"
#include "jit/target_select.hpp"
#include "jit/variants.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/target.hpp"
#include "ops/fp8_act_quant_floor.hpp"
#include "ops/quant_device_rule.hpp"

namespace kiln::cli {

namespace {

std::vector<std::string> published_gpu_list() {
  std::vector<std::string> names;
  for (const ops::PublishedGpu& gpu : ops::published_gpus()) names.push_back(gpu.name);
  return names;
}

std::string published_gpu_names() {
  std::string names;
  for (const std::string& name : published_gpu_list()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

std::string grid_text(const std::array<std::uint32_t, 3>& grid) {
  return "(" + std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " + std::to_string(grid[2]) + ")";
}

struct PickArgs {
  std::uint32_t m = 0;
  std::uint32_t k = 0;
  std::uint32_t sm_count = 0;  ///< 0: the --gpu's
  std::string gpu = "h200";
  std::string arch = "auto";
  bool seed = false;
  std::string twin = "auto";
  bool no_twin_kernel = false;
  std::string variant;
  std::string one_group = "auto";
  std::uint32_t experts = 0;
  bool masked = false;
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

// The device the pick answers for: a published GPU's figures, --sm-count over its SM count.
ops::QuantDeviceFigures device_of(const PickArgs& args) {
  for (const ops::PublishedGpu& gpu : ops::published_gpus())
    if (gpu.name == args.gpu) {
      ops::QuantDeviceFigures figures = gpu.figures;
      if (args.sm_count != 0) figures.sm_count = args.sm_count;
      return figures;
    }
  throw CLI::ValidationError("--gpu", "expected one of " + published_gpu_names() + ", got '" + args.gpu + "'");
}

// The target --arch names (auto: KILN_ARCH, else sm_90a), which decides whether the twin is in the
// image. Why not the GPU's or NVRTC's list: the pick answers without either.
Target target_of(const PickArgs& args) {
  if (args.arch != "auto") {
    try {
      return parse_target(args.arch);
    } catch (const Error& e) {
      throw CLI::ValidationError("--arch", e.what());
    }
  }
  if (const std::optional<Target> chosen = target_override_from_env()) return *chosen;
  return parse_target("sm_90a");
}

void print_variant_pick(const PickArgs& args, const ops::QuantVariant& variant) {
  const ops::QuantDeviceFigures device = device_of(args);
  const Target target = target_of(args);
  ops::QuantPickInputs in;
  in.m = args.m;
  in.k = args.k;
  in.sm_count = device.sm_count;
  in.twin_present = target.carries("hopper") && !args.no_twin_kernel;
  in.prefers_shared = ops::quant_prefers_shared(device);
  in.twin_lever = args.twin == "auto" ? ops::fp8_act_quant_hopper_enabled() : args.twin == "on";
  in.one_group_lever = args.one_group == "auto" ? ops::quant_one_group_lever() : args.one_group == "on";
  in.experts = args.experts;
  in.masked = args.masked;
  ops::QuantArgs shape;
  // Why stand-in pointers: check() reads only their alignment, and the pick needs no memory.
  alignas(16) static unsigned char stand_in[16];
  shape.x = shape.q = shape.scales = stand_in;
  shape.m = args.m;
  shape.k = args.k;
  shape.experts = args.experts;
  // Why: a shape launch() refuses is refused here with launch()'s error, never shown as a grid.
  ops::GroupQuant::check(variant, shape);
  in.seed_call = ops::GroupQuant::seed_call(shape);
  const ops::QuantPick chosen = ops::GroupQuant::pick_with(variant, in);
  const auto kernels = ops::quant_kernels_of(variant);
  // The numbers behind the reasons that have them.
  const auto detail = [&](ops::QuantPickReason reason) -> std::string {
    switch (reason) {
      case ops::QuantPickReason::twin_fills_device:
      case ops::QuantPickReason::twin_too_few_ctas:
        return " (" + ops::fp8_quant_hopper_grid_text(args.m, args.k, device.sm_count) + ")";
      case ops::QuantPickReason::shared_small_grid:
        return " (shared grid " + std::to_string(std::uint64_t{args.m} * (args.k / 128)) + " CTAs, ceiling " +
               std::to_string(std::uint64_t{ops::QUANT_SHARED_MAX_CTAS_PER_SM} * device.sm_count) + " = " +
               std::to_string(ops::QUANT_SHARED_MAX_CTAS_PER_SM) + " x " + std::to_string(device.sm_count) + " SMs)";
      case ops::QuantPickReason::device_prefers_family:
      case ops::QuantPickReason::device_prefers_shared: return " (" + ops::quant_device_rule_text(device) + ")";
      case ops::QuantPickReason::one_group_small_grid:
      case ops::QuantPickReason::one_group_large_grid:
        return " (one-group grid " + std::to_string(ops::GroupQuant::grid(variant, args.m, args.k, 1)[0]) +
               " CTAs, ceiling " + std::to_string(std::uint64_t{ops::QUANT_ONE_GROUP_MAX_CTAS_PER_SM} * device.sm_count) +
               " = 64 x " + std::to_string(device.sm_count) + " SMs)";
      case ops::QuantPickReason::batched_input:
        return " (" + std::to_string(args.experts) + " experts of " + std::to_string(args.m) + " rows" +
               (args.masked ? ", masked: at most " + std::to_string(ops::QUANT_MASKED_CTAS_PER_SM) + " x " +
                                  std::to_string(device.sm_count) + " SMs CTAs over all experts, each looping over its rows"
                            : "") +
               ")";
      default: return "";
    }
  };
  const auto words = [&](ops::QuantPickReason reason) {
    // Why: the library's words name the variable, which did not decide when --one-group did.
    if (reason == ops::QuantPickReason::one_group_lever_off && args.one_group == "off")
      return std::string("two groups per slot: chosen by the caller (--one-group off)");
    return std::string(ops::to_string(reason)) + detail(reason);
  };
  if (args.json) {
    nlohmann::json candidates = nlohmann::json::array();
    for (ops::QuantKernel kernel : ops::QUANT_KERNELS)
      candidates.push_back({{"kernel", ops::to_string(kernel)},
                            {"in_variant", kernels[static_cast<std::size_t>(kernel)]},
                            {"runs", !chosen.noop && chosen.kernel == kernel},
                            {"why", chosen.noop ? nlohmann::json(nullptr) : nlohmann::json(words(chosen.why_not(kernel)))}});
    nlohmann::json out{{"variant", variant.module_name()}, {"m", args.m}, {"k", args.k}, {"experts", args.experts},
                       {"masked", args.masked}, {"target", target.name()},
                       {"gpu", args.gpu}, {"sm_count", device.sm_count}, {"noop", chosen.noop},
                       {"twin_requested", in.twin_lever}, {"one_group_requested", in.one_group_lever},
                       {"prefers_shared", in.prefers_shared}, {"device_rule", ops::quant_device_rule_text(device)},
                       {"candidates", candidates}};
    out["kernel"] = chosen.noop ? nlohmann::json(nullptr) : nlohmann::json(ops::to_string(chosen.kernel));
    out["entry"] = chosen.noop ? nlohmann::json(nullptr) : nlohmann::json(chosen.entry);
    out["grid"] = chosen.grid;
    out["block"] = {chosen.block, chosen.noop ? 0 : 1, chosen.noop ? 0 : 1};
    out["why"] = chosen.noop ? nlohmann::json("no-op: m == 0 or k == 0, nothing to quantize")
                             : nlohmann::json(words(chosen.reason()));
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("variant %s m=%u k=%u%s target %s gpu %s (%u SMs)\n", variant.module_name().c_str(), args.m, args.k,
              args.experts != 0 ? (" experts=" + std::to_string(args.experts) + (args.masked ? " masked" : "")).c_str() : "",
              target.name().c_str(), args.gpu.c_str(), device.sm_count);
  if (chosen.noop) {
    std::printf("no-op: m == 0 or k == 0, nothing to quantize\n");
    return;
  }
  std::printf("kernel: %s (%s)\ngrid:   %s  block (%u, 1, 1)\nwhy:    %s\n", std::string(chosen.entry).c_str(),
              std::string(ops::to_string(chosen.kernel)).c_str(), grid_text(chosen.grid).c_str(), chosen.block,
              words(chosen.reason()).c_str());
  for (ops::QuantKernel kernel : ops::QUANT_KERNELS)
    if (kernel != chosen.kernel)
      std::printf("not %-33s %s\n", (std::string(ops::to_string(kernel)) + ":").c_str(),
                  words(chosen.why_not(kernel)).c_str());
}

// The seed quantizer's own pick (kiln_fp8_act_quant): the shared kernel or the twin.
void print_seed_pick(const PickArgs& args) {
  const std::uint32_t sm_count = device_of(args).sm_count;
  check_k(args.k, ops::FP8_QUANT_GROUP, "");
  const bool requested = args.twin == "auto" ? ops::fp8_act_quant_hopper_enabled() : args.twin == "on";
  // Why placeholder handles: `pick` explains the rule without a GPU; 1 and 2 stand for "loaded".
  const ops::Fp8ActQuant quant(KernelHandle{1}, args.no_twin_kernel ? KernelHandle{} : KernelHandle{2}, sm_count);
  const auto chosen = quant.pick_with(requested, args.m, args.k, sm_count);
  // Why: a shape launch() refuses is refused here with launch()'s error, never shown as a grid.
  ops::fp8_quant_require_launchable(chosen, args.m, args.k);
  const bool noop = chosen.action == ops::Fp8QuantAction::noop;
  const std::string kernel(chosen.twin ? ops::FP8_QUANT_HOPPER_ENTRY : ops::FP8_QUANT_ENTRY);
  const std::string reason = chosen.reject ? std::string(ops::to_string(*chosen.reject)) : "";
  const auto ctas = ops::fp8_quant_hopper_ctas(args.m, args.k);
  const auto floor = ops::fp8_quant_min_ctas(sm_count);
  const auto min_m = ops::fp8_quant_hopper_min_m(args.k, sm_count);
  std::string why;
  if (noop)
    why = std::string(ops::to_string(chosen.action));
  else if (chosen.twin)
    why = "the twin fills the device (" + ops::fp8_quant_hopper_grid_text(args.m, args.k, sm_count) + ")";
  else
    why = reason + " (" + ops::fp8_quant_hopper_grid_text(args.m, args.k, sm_count) + "; every M >= " +
          std::to_string(min_m) + " reaches the floor at this K)";
  if (args.json) {
    nlohmann::json out{{"m", args.m}, {"k", args.k}, {"sm_count", sm_count}, {"requested", requested},
                       {"noop", noop}, {"twin", chosen.twin}, {"grid", chosen.grid},
                       {"block", {128, 1, 1}}, {"twin_ctas", ctas}, {"min_ctas", floor},
                       {"twin_min_m", min_m}, {"why", why}};
    out["kernel"] = noop ? nlohmann::json(nullptr) : nlohmann::json(kernel);
    out["reject"] = chosen.reject ? nlohmann::json(reason) : nlohmann::json(nullptr);
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("m=%u k=%u sm_count=%u lever=%s\n", args.m, args.k, sm_count, requested ? "on" : "off");
  if (noop) {
    std::printf("%s\n", why.c_str());
    return;
  }
  std::printf("kernel: %s\ngrid:   %s  block (128, 1, 1)\n", kernel.c_str(), grid_text(chosen.grid).c_str());
  std::printf("%s %s\n", chosen.twin ? "why:   " : "why not the twin:", why.c_str());
}

void print_pick(const PickArgs& args) {
  if (args.seed) return print_seed_pick(args);
  const ops::QuantVariant variant = args.variant.empty() ? ops::QuantVariant{} : quant_variant_named(args.variant);
  check_k(args.k, variant.group, " (the group of " + variant.module_name() + ")");
  print_variant_pick(args, variant);
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
  cmd->add_option("--gpu", args->gpu, "The device, by its published figures: " + published_gpu_names() + " (default h200)")
      ->check(one_of(published_gpu_list()));
  cmd->add_option("--sm-count", args->sm_count, "SM count of the device (default: the --gpu's)")
      ->transform(integer_in(1, 65535));
  cmd->add_option("--arch", args->arch, "Target whose image the pick sees (the twin is in sm_90 and sm_90a only): sm_90a, compute_80, ...; auto (KILN_ARCH, else sm_90a)");
  cmd->add_flag("--seed", args->seed, "The seed quantizer's own pick (kiln_fp8_act_quant): its shared kernel or the twin");
  cmd->add_option("--twin", args->twin, "Lever: on, off, or auto (KILN_FP8_ACT_QUANT_HOPPER)")
      ->check(one_of({"on", "off", "auto"}));
  cmd->add_flag("--no-twin-kernel", args->no_twin_kernel, "Pretend the image lacks the Hopper twin");
  auto* variant = cmd->add_option("--variant", args->variant,
                  "A quantizer family variant (`kiln list --variants`, or 'per_token_group_quant name=value ...'); "
                  "default: the default variant (bf16, group 128, e4m3, row-major scales)");
  cmd->add_option("--one-group", args->one_group, "The one-group lever: on, off, or auto (KILN_Q_ONE_GROUP)")
      ->check(one_of({"on", "off", "auto"}));
  auto* experts = cmd->add_option("--experts", args->experts,
                                  "A batch of this many experts (MoE) of --m rows each: the batched kernel's pick")
                      ->transform(integer_in(1, 65535));
  auto* masked = cmd->add_flag("--masked", args->masked, "The batch has a device count of valid rows per expert (masked_m)");
  masked->needs(experts);
  experts->excludes(cmd->get_option("--seed"));
  variant->excludes(cmd->get_option("--seed"));
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args] { print_pick(*args); });
}

}  // namespace kiln::cli

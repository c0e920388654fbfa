// The bandwidth part: the device-to-device copy ceiling, both quantizer arms at every shape, and
// the floor points where the pick decides between them.
#include <algorithm>
#include <cmath>
#include <limits>

#include "bench_device.hpp"
#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "driver/driver_check.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"
#include "ops/fp8_act_quant_floor.hpp"

namespace kiln::bench {

namespace {

constexpr std::size_t COPY_BYTES = std::size_t{4} << 30;
constexpr double TIE = 0.03;             // arms within 3% are a tie: either choice agrees
constexpr double LARGE_ELEMENTS = 32e6;  // "M*K >= 32M elements", read as decimal millions (the stricter)

struct Ceiling {
  double gbps = 0;
  double ms = 0;
};

/// Median of event-timed cuMemcpyDtoDAsync of COPY_BYTES, counting bytes read plus written.
Ceiling measure_ceiling(const BenchPlan& plan, GpuSession& gpu) {
  test::DeviceBuffer src(gpu.context(), COPY_BYTES), dst(gpu.context(), COPY_BYTES);
  gpu.fill_bf16(src.get(), COPY_BYTES / 2, 7);
  const auto copy = [&] {
    driver::check(gpu.api(),
                  gpu.api().cuMemcpyDtoDAsync_v2(reinterpret_cast<CUdeviceptr>(dst.get()),
                                                 reinterpret_cast<CUdeviceptr>(src.get()), COPY_BYTES, gpu.stream()),
                  "cuMemcpyDtoDAsync");
  };
  copy();
  copy();
  gpu.event(2 * static_cast<std::size_t>(plan.ceiling_copies));
  gpu.synchronize();
  gpu.spin_us(200);
  for (int i = 0; i < plan.ceiling_copies; ++i) {
    gpu.record(gpu.event(2 * static_cast<std::size_t>(i)));
    copy();
    gpu.record(gpu.event(2 * static_cast<std::size_t>(i) + 1));
  }
  gpu.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < plan.ceiling_copies; ++i)
    ms.push_back(
        gpu.elapsed_ms(gpu.event(2 * static_cast<std::size_t>(i)), gpu.event(2 * static_cast<std::size_t>(i) + 1)));
  Ceiling out;
  out.ms = median(ms);
  out.gbps = 2.0 * static_cast<double>(COPY_BYTES) / (out.ms * 1e-3) / 1e9;
  return out;
}

struct ArmPair {
  std::uint32_t m = 0, k = 0;
  double shared_us = 0;
  double twin_us = std::numeric_limits<double>::quiet_NaN();  ///< NaN: the image has no twin
  double copy_us = 0;  ///< a device-to-device copy moving the same bytes (arms table only)
  double twin_pdl_us = std::numeric_limits<double>::quiet_NaN();  ///< the twin launched with PDL (arms table only)
  double family_us = 0;  ///< the default variant's family kernel (GroupQuant::launch_as)
  std::size_t copies = 0;
  bool pick_twin = false;
  ops::QuantKernel one_pick = ops::QuantKernel::shared;  ///< what kiln_quant runs for the default variant
  /// The time of the kernel kiln_quant runs.
  double picked_us() const {
    switch (one_pick) {
      case ops::QuantKernel::twin: return twin_us;
      case ops::QuantKernel::shared: return shared_us;
      default: return family_us;
    }
  }
  /// The fastest arm's time.
  double fastest_us() const { return std::min({shared_us, family_us, has_twin() ? twin_us : shared_us}); }
  /// kiln_quant's kernel is the fastest, within a 3% tie.
  bool one_pick_fastest() const { return picked_us() <= (1 + TIE) * fastest_us(); }
  bool has_twin() const { return !std::isnan(twin_us); }
  bool faster_twin() const { return has_twin() && twin_us < shared_us; }
  bool tie() const { return has_twin() && std::fabs(twin_us - shared_us) <= TIE * std::min(twin_us, shared_us); }
  bool agree() const { return !has_twin() || tie() || pick_twin == faster_twin(); }
};

ops::QuantArgs args_of(const ShapeBuffers::Slot& slot, std::uint32_t m, std::uint32_t k, CUstream stream) {
  ops::QuantArgs args;
  args.x = slot.x;
  args.q = slot.q;
  args.scales = slot.scales;
  args.m = m;
  args.k = k;
  args.stream = stream;
  return args;
}

ArmPair measure_pair(GpuSession& gpu, std::uint32_t m, std::uint32_t k, int launches) {
  ShapeBuffers buffers(gpu, m, k);
  ArmPair pair;
  pair.m = m;
  pair.k = k;
  pair.copies = buffers.copies();
  pair.shared_us = time_arm_us(gpu, buffers, gpu.quant().shared(), false, launches);
  if (gpu.quant().twin_present()) pair.twin_us = time_arm_us(gpu, buffers, gpu.quant().hopper(), true, launches);
  pair.family_us = time_launches_us(
      gpu,
      [&] {
        gpu.default_quant().launch_as(gpu.backend(), args_of(buffers.next(), m, k, gpu.stream()),
                                      ops::QuantKernel::family_one_group);
      },
      launches, "the family kernel at M=" + std::to_string(m) + " K=" + std::to_string(k));
  pair.pick_twin = gpu.quant().pick(m, k).twin;
  pair.one_pick = gpu.default_quant().pick(gpu.backend(), args_of(buffers.next(), m, k, gpu.stream())).kernel;
  return pair;
}

std::string arm_name(bool twin) { return twin ? "twin" : "shared"; }

double gbps(std::uint32_t m, std::uint32_t k, double us) { return quant_bytes(m, k) / (us * 1e-6) / 1e9; }

nlohmann::json pair_json(const ArmPair& pair) {
  nlohmann::json row{{"m", pair.m},
                     {"k", pair.k},
                     {"bytes", quant_bytes(pair.m, pair.k)},
                     {"copies", pair.copies},
                     {"shared_us", pair.shared_us},
                     {"family_us", pair.family_us},
                     {"one_pick", ops::to_string(pair.one_pick)},
                     {"one_pick_fastest", pair.one_pick_fastest()},
                     {"pick", arm_name(pair.pick_twin)},
                     {"agree", pair.agree()},
                     {"tie", pair.tie()}};
  if (pair.has_twin()) {
    row["twin_us"] = pair.twin_us;
    row["faster"] = arm_name(pair.faster_twin());
  }
  return row;
}

/// pair_json plus each arm's GB/s and fraction of the ceiling.
nlohmann::json bandwidth_json(const ArmPair& pair, const Ceiling& ceiling) {
  nlohmann::json row = pair_json(pair);
  row["shared_gbps"] = gbps(pair.m, pair.k, pair.shared_us);
  row["shared_of_ceiling"] = gbps(pair.m, pair.k, pair.shared_us) / ceiling.gbps;
  row["copy_us"] = pair.copy_us;
  row["family_of_ceiling"] = gbps(pair.m, pair.k, pair.family_us) / ceiling.gbps;
  row["picked_of_copy"] = pair.copy_us / pair.picked_us();
  row["copy_of_ceiling"] = gbps(pair.m, pair.k, pair.copy_us) / ceiling.gbps;
  if (pair.has_twin()) {
    row["twin_gbps"] = gbps(pair.m, pair.k, pair.twin_us);
    row["twin_of_ceiling"] = gbps(pair.m, pair.k, pair.twin_us) / ceiling.gbps;
    row["twin_of_copy"] = pair.copy_us / pair.twin_us;
    row["twin_pdl_us"] = pair.twin_pdl_us;
    row["twin_pdl_of_ceiling"] = gbps(pair.m, pair.k, pair.twin_pdl_us) / ceiling.gbps;
  }
  return row;
}

std::string percent(double fraction) { return fixed(100 * fraction, 1) + "%"; }

// kiln_quant's default variant against the arms: the one pick's kernel at M*K >= 32M against a
// copy of the same bytes, and never slower than the shared kernel (nor the fastest arm) anywhere.
void one_pick_targets(const std::vector<ArmPair>& pairs, const std::string& target, Report& report) {
  const ArmPair* worst = nullptr;
  int not_slower = 0, fastest = 0;
  std::string slower_at, not_fastest_at;
  for (const ArmPair& pair : pairs) {
    const std::string at = std::to_string(pair.m) + "x" + std::to_string(pair.k);
    if (pair.picked_us() <= (1 + TIE) * pair.shared_us)
      ++not_slower;
    else
      slower_at += (slower_at.empty() ? "" : ", ") + at;
    if (pair.one_pick_fastest())
      ++fastest;
    else
      not_fastest_at += (not_fastest_at.empty() ? "" : ", ") + at;
    if (static_cast<double>(pair.m) * pair.k >= LARGE_ELEMENTS &&
        (worst == nullptr || pair.copy_us / pair.picked_us() < worst->copy_us / worst->picked_us()))
      worst = &pair;
  }
  const int points = static_cast<int>(pairs.size());
  report.add_target({"kiln_quant default variant (" + target + "): never slower than the shared kernel (3% tie)",
                     std::to_string(not_slower) + " of " + std::to_string(points) +
                         (slower_at.empty() ? "" : "; slower at " + slower_at),
                     "all", not_slower == points, {{"points", points}, {"not_slower", not_slower}}});
  report.add_target({"kiln_quant default variant (" + target + "): runs the fastest arm (3% tie)",
                     std::to_string(fastest) + " of " + std::to_string(points) +
                         (not_fastest_at.empty() ? "" : "; not at " + not_fastest_at),
                     "(report)", std::nullopt, {{"points", points}, {"fastest", fastest}}});
  if (worst != nullptr) {
    const double fraction = worst->copy_us / worst->picked_us();
    report.add_target({"kiln_quant default variant (" + target +
                           "), M*K >= 32e6: worst speed as a fraction of a copy of the same bytes",
                       percent(fraction) + " at " + std::to_string(worst->m) + " x " + std::to_string(worst->k) + " (" +
                           std::string(ops::to_string(worst->one_pick)) + ")",
                       ">= 90%", fraction >= 0.90, {{"fraction", fraction}, {"m", worst->m}, {"k", worst->k}}});
  }
}

void arms_table(const BenchPlan& plan, GpuSession& gpu, const Ceiling& ceiling, Report& report) {
  Table table;
  table.id = "arms";
  table.title =
      "arms: median kernel time per launch (" + std::to_string(plan.arm_launches) +
      " launches in batches of 10 between event pairs, queued back to back behind a spin; inputs rotated over "
      "2x L2); "
      "bytes = 3MK + 4MK/128; copy: a device-to-device copy moving the same bytes, timed the same way, and the "
      "twin's speed as a fraction of it; twin PDL: the twin launched with programmatic dependent launch, so each "
      "launch of a batch overlaps the drain of the one before; family: the default variant's family kernel; "
      "kiln_quant: the kernel the one pick runs for the default variant, and its speed against the copy";
  table.columns = {"M",          "K",       "MB",        "shared us", "shared GB/s", "shared %ceil",
                   "twin us",    "twin GB/s", "twin %ceil", "copy us", "copy %ceil", "twin/copy",
                   "twin PDL us", "twin PDL %ceil", "pick", "faster",    "agree",
                   "family us", "family %ceil", "kiln_quant", "kiln_quant/copy", "fastest"};
  // Why an empty kernel here too: the small shapes' times are mostly launch and ramp, which move
  // between runs and machines; this is the floor under them in the same run, timed the same way.
  const double empty = empty_us(gpu, plan.arm_launches);
  std::vector<ArmPair> pairs;
  for (std::uint32_t m : arm_ms())
    for (std::uint32_t k : arm_ks()) {
      ArmPair pair = measure_pair(gpu, m, k, plan.arm_launches);
      // Why here and not in measure_pair: the floor table does not show the copy.
      pair.copy_us = copy_us(gpu, quant_bytes(m, k), plan.arm_launches);
      if (pair.has_twin()) {
        ShapeBuffers buffers(gpu, m, k);
        const LaunchOptions pdl{true};
        pair.twin_pdl_us = time_launches_us(
            gpu, [&] { launch_quant(gpu, gpu.quant().hopper(), true, m, k, buffers.next(), gpu.stream(), pdl); },
            plan.arm_launches, "the twin with PDL at M=" + std::to_string(m) + " K=" + std::to_string(k));
      }
      pairs.push_back(pair);
      const double shared_gbps = gbps(m, k, pair.shared_us);
      const double twin_gbps = pair.has_twin() ? gbps(m, k, pair.twin_us) : std::nan("");
      table.add(
          {std::to_string(m), std::to_string(k), fixed(quant_bytes(m, k) / 1e6, 2), fixed(pair.shared_us, 2),
           fixed(shared_gbps, 0), percent(shared_gbps / ceiling.gbps), fixed(pair.twin_us, 2), fixed(twin_gbps, 0),
           pair.has_twin() ? percent(twin_gbps / ceiling.gbps) : "-", fixed(pair.copy_us, 2),
           percent(gbps(m, k, pair.copy_us) / ceiling.gbps), pair.has_twin() ? percent(pair.copy_us / pair.twin_us) : "-",
           pair.has_twin() ? fixed(pair.twin_pdl_us, 2) : "-",
           pair.has_twin() ? percent(gbps(m, k, pair.twin_pdl_us) / ceiling.gbps) : "-", arm_name(pair.pick_twin),
           pair.has_twin() ? (pair.tie() ? "tie" : arm_name(pair.faster_twin())) : "-", yes_no(pair.agree()),
           fixed(pair.family_us, 2), percent(gbps(m, k, pair.family_us) / ceiling.gbps),
           std::string(ops::to_string(pair.one_pick)), percent(pair.copy_us / pair.picked_us()),
           yes_no(pair.one_pick_fastest())},
          bandwidth_json(pair, ceiling));
    }
  const auto agreeing = std::count_if(pairs.begin(), pairs.end(), [](const ArmPair& p) { return p.agree(); });
  table.notes.push_back("pick (device SM count " + std::to_string(gpu.backend().device().sm_count) + ", lever " +
                        (ops::fp8_act_quant_hopper_enabled() ? "on" : "off") + ") chose the faster arm at " +
                        std::to_string(agreeing) + " of " + std::to_string(pairs.size()) +
                        " shapes (3% counts as a tie)");
  table.notes.push_back("the empty kernel (grid 1, block 128), timed the same way: " + fixed(empty, 2) + " us");
  report.add(std::move(table));
  report.add_target({"empty kernel, timed as the arms", fixed(empty, 2) + " us", "(report)", std::nullopt, {{"us", empty}}});
  one_pick_targets(pairs, gpu.backend().target()->name(), report);

  if (!gpu.quant().twin_present()) {
    report.add_target({"twin bandwidth targets", "no twin in this image (" + gpu.backend().target()->name() + ")",
                       "Hopper only", std::nullopt});
    return;
  }
  const ArmPair* worst = nullptr;
  std::vector<double> shared_large;
  for (const auto& pair : pairs) {
    if (static_cast<double>(pair.m) * pair.k < LARGE_ELEMENTS) continue;
    shared_large.push_back(gbps(pair.m, pair.k, pair.shared_us) / ceiling.gbps);
    if (worst == nullptr ||
        pair.twin_us / quant_bytes(pair.m, pair.k) > worst->twin_us / quant_bytes(worst->m, worst->k))
      worst = &pair;
  }
  if (worst != nullptr) {
    const double fraction = gbps(worst->m, worst->k, worst->twin_us) / ceiling.gbps;
    report.add_target({"twin, M*K >= 32e6: worst shape's fraction of the copy ceiling",
                       percent(fraction) + " at " + std::to_string(worst->m) + " x " + std::to_string(worst->k),
                       ">= 90%",
                       fraction >= 0.90,
                       {{"fraction", fraction}, {"m", worst->m}, {"k", worst->k}}});
    const auto of_copy = [](const ArmPair& p) { return p.copy_us / p.twin_us; };
    const ArmPair* behind_copy = &*std::min_element(pairs.begin(), pairs.end(), [&](const ArmPair& a, const ArmPair& b) {
      const bool a_large = static_cast<double>(a.m) * a.k >= LARGE_ELEMENTS;
      const bool b_large = static_cast<double>(b.m) * b.k >= LARGE_ELEMENTS;
      return a_large != b_large ? a_large : of_copy(a) < of_copy(b);
    });
    report.add_target({"twin, M*K >= 32e6: worst speed as a fraction of a copy of the same bytes",
                       percent(of_copy(*behind_copy)) + " at " + std::to_string(behind_copy->m) + " x " +
                           std::to_string(behind_copy->k) + " (copy " +
                           percent(gbps(behind_copy->m, behind_copy->k, behind_copy->copy_us) / ceiling.gbps) +
                           " of the ceiling there)",
                       "(report)",
                       std::nullopt,
                       {{"fraction", of_copy(*behind_copy)}, {"m", behind_copy->m}, {"k", behind_copy->k}}});
    const double shared_median = median(shared_large);
    report.add_target({"shared kernel, M*K >= 32e6: median fraction of the copy ceiling",
                       percent(shared_median),
                       "(report)",
                       std::nullopt,
                       {{"fraction", shared_median}}});
  }
  for (const auto& pair : pairs)
    if (pair.m == 2048 && pair.k == 7168) {
      const double fraction = gbps(pair.m, pair.k, pair.twin_us) / ceiling.gbps;
      report.add_target({"twin, 2048 x 7168: fraction of the copy ceiling",
                         percent(fraction),
                         ">= 75%",
                         fraction >= 0.75,
                         {{"fraction", fraction}, {"us", pair.twin_us}}});
    }
}

void floor_table(const BenchPlan& plan, GpuSession& gpu, Report& report) {
  if (!gpu.quant().twin_present()) {
    report.skip("floor", "no twin in this image (" + gpu.backend().target()->name() + ")");
    return;
  }
  Table table;
  table.id = "floor";
  table.title = "floor: twin against shared where the CTA floor decides (" + std::to_string(plan.floor_launches) +
                " launches each, timed as the arms)";
  table.columns = {"M", "K", "twin CTAs", "shared us", "twin us", "faster", "pick", "agree"};
  int agreeing = 0, points = 0;
  std::string misses;
  for (std::uint32_t k : floor_ks())
    for (std::uint32_t m : floor_ms()) {
      const ArmPair pair = measure_pair(gpu, m, k, plan.floor_launches);
      ++points;
      if (pair.agree())
        ++agreeing;
      else
        misses += (misses.empty() ? "" : ", ") + std::to_string(m) + "x" + std::to_string(k);
      auto record = pair_json(pair);
      record["twin_ctas"] = ops::fp8_quant_hopper_ctas(m, k);
      table.add({std::to_string(m), std::to_string(k), std::to_string(ops::fp8_quant_hopper_ctas(m, k)),
                 fixed(pair.shared_us, 2), fixed(pair.twin_us, 2), pair.tie() ? "tie" : arm_name(pair.faster_twin()),
                 arm_name(pair.pick_twin), yes_no(pair.agree())},
                std::move(record));
    }
  table.notes.push_back("the floor: " + fixed(ops::FP8_QUANT_MIN_CTAS_PER_SM, 2) + " twin CTAs per SM x " +
                        std::to_string(gpu.backend().device().sm_count) +
                        " SMs = " + std::to_string(ops::fp8_quant_min_ctas(gpu.backend().device().sm_count)) + " CTAs");
  report.add(std::move(table));
  report.add_target(
      {"floor: the pick routes every point to the faster arm (ties within 3% either way)",
       std::to_string(agreeing) + " of " + std::to_string(points) + (misses.empty() ? "" : "; missed " + misses),
       "all",
       agreeing == points,
       {{"agree", agreeing}, {"points", points}}});
}

}  // namespace

double run_gpu(const BenchPlan& plan, GpuSession& gpu, Report& report) {
  const Ceiling ceiling = measure_ceiling(plan, gpu);
  Table table;
  table.id = "ceiling";
  table.title = "ceiling: cuMemcpyDtoDAsync of 4 GiB, bytes read plus written (median of " +
                std::to_string(plan.ceiling_copies) + ")";
  table.columns = {"copy", "ms", "GB/s"};
  table.add(
      {"4 GiB device to device", fixed(ceiling.ms, 3), fixed(ceiling.gbps, 0)},
      {{"bytes_copied", COPY_BYTES}, {"bytes_counted", 2 * COPY_BYTES}, {"ms", ceiling.ms}, {"gbps", ceiling.gbps}});
  report.add(std::move(table));
  arms_table(plan, gpu, ceiling, report);
  floor_table(plan, gpu, report);
  return ceiling.gbps;
}

}  // namespace kiln::bench

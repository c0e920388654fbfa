// A masked MoE batch as DeepSeek-style layers with low-latency dispatch quantize it: 32 local
// experts of 1024 slots, 5% of the slots valid (masked_m on the GPU), against the same batch with
// every slot valid and against one matrix of just the valid rows (the least the call must move).
// Timed as the arms (batches of 10 behind a spin), inputs rotated over copies spanning twice the L2.
#include <algorithm>
#include <string>
#include <vector>

#include "bench_device.hpp"
#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/group_quant.hpp"

namespace kiln::bench {

namespace {

constexpr std::uint32_t EXPERTS = 32;
constexpr std::uint32_t SLOTS = 1024;
constexpr std::uint32_t VALID = 51;  // 5% of the slots, every expert alike

struct MoeCase {
  const char* name;
  ops::QuantVariant variant;
  std::uint32_t k;
};

// One batch's buffers in `copies` copies, and the masked_m arrays of each case.
class MoeBuffers {
 public:
  MoeBuffers(GpuSession& gpu, const ops::QuantVariant& v, std::uint32_t k, std::size_t copies)
      : x_bytes_(std::size_t{EXPERTS} * SLOTS * k * (v.silu_and_mul ? 2 : 1) * 2),
        q_bytes_(std::size_t{EXPERTS} * SLOTS * k),
        s_bytes_(ops::quant_scales_bytes(v, SLOTS, k, EXPERTS)),
        copies_(copies),
        x_(gpu.context(), x_bytes_ * copies),
        q_(gpu.context(), q_bytes_ * copies),
        s_(gpu.context(), s_bytes_ * copies),
        all_(gpu.context(), 4 * EXPERTS),
        few_(gpu.context(), 4 * EXPERTS) {
    gpu.fill_bf16(x_.get(), x_.bytes() / 2, k);
    const std::vector<std::int32_t> all(EXPERTS, SLOTS), few(EXPERTS, VALID);
    all_.upload(all.data(), 4 * EXPERTS);
    few_.upload(few.data(), 4 * EXPERTS);
  }

  // The call's arguments on copy `launch % copies`: a batch (masked by `masked_m` when not null),
  // or with `rows` set, one matrix of that many rows.
  ops::QuantArgs args(std::size_t launch, std::uint32_t k, const void* masked_m, std::uint32_t rows, void* stream) const {
    const std::size_t i = launch % copies_;
    ops::QuantArgs args;
    args.x = static_cast<const char*>(x_.get()) + i * x_bytes_;
    args.q = static_cast<char*>(q_.get()) + i * q_bytes_;
    args.scales = static_cast<char*>(s_.get()) + i * s_bytes_;
    args.k = k;
    args.stream = stream;
    if (rows != 0) {
      args.m = rows;
      return args;
    }
    args.m = SLOTS;
    args.experts = EXPERTS;
    args.masked_m = static_cast<const std::int32_t*>(masked_m);
    return args;
  }
  const void* all() const noexcept { return all_.get(); }
  const void* few() const noexcept { return few_.get(); }

 private:
  std::size_t x_bytes_, q_bytes_, s_bytes_, copies_;
  test::DeviceBuffer x_, q_, s_, all_, few_;
};

}  // namespace

void run_moe(const BenchPlan& plan, GpuSession& gpu, Report& report) {
  using ops::QuantInput, ops::QuantOutput, ops::QuantScales;
  const std::vector<MoeCase> cases = {
      {"DeepGEMM fp32 scales (Hopper)", {QuantInput::bf16, 128, QuantOutput::e4m3, QuantScales::column_major_tma, false, false}, 7168},
      {"DeepGEMM UE8M0 packed (SM100)", {QuantInput::bf16, 128, QuantOutput::e4m3, QuantScales::ue8m0_packed, true, false}, 7168},
      {"fused SiLU, fp32 scales", {QuantInput::bf16, 128, QuantOutput::e4m3, QuantScales::column_major_tma, false, true}, 2048},
      {"fused SiLU, UE8M0 packed", {QuantInput::bf16, 128, QuantOutput::e4m3, QuantScales::ue8m0_packed, true, true}, 2048},
  };
  Table table;
  table.id = "moe";
  table.title = "masked MoE batch: " + std::to_string(EXPERTS) + " experts x " + std::to_string(SLOTS) + " slots, " +
                std::to_string(VALID) + " valid per expert (5%), us per launch";
  table.columns = {"case", "K", "all slots", "masked 5%", "masked 100%", "valid rows alone", "5% / all", "5% / alone"};
  double worst_to_alone = 0;
  for (const MoeCase& c : cases) {
    const ops::GroupQuant quant = gpu.service().group_quant(c.variant);
    if (!quant.prepare_batched(gpu.backend())) throw_error("bench: the batched form of " + c.variant.module_name() + " did not load");
    const std::size_t valid_bytes = std::size_t{EXPERTS} * VALID * c.k * (c.variant.silu_and_mul ? 5 : 3);
    MoeBuffers buffers(gpu, c.variant, c.k, std::max<std::size_t>(2, (2 * gpu.l2_bytes()) / valid_bytes + 1));
    const auto timed = [&](const void* masked_m, std::uint32_t rows, const char* what) {
      std::size_t launch = 0;
      gpu.synchronize();
      return time_launches_us(
          gpu, [&] { quant.launch(gpu.backend(), buffers.args(launch++, c.k, masked_m, rows, gpu.stream())); },
          plan.variant_launches, std::string(c.name) + " " + what);
    };
    const double all = timed(nullptr, 0, "all slots");
    const double few = timed(buffers.few(), 0, "masked 5%");
    const double full = timed(buffers.all(), 0, "masked 100%");
    const double alone = timed(nullptr, EXPERTS * VALID, "valid rows alone");
    worst_to_alone = std::max(worst_to_alone, few / alone);
    table.add({c.name, std::to_string(c.k), fixed(all, 2), fixed(few, 2), fixed(full, 2), fixed(alone, 2),
               fixed(few / all, 3), fixed(few / alone, 2)},
              {{"case", c.name}, {"variant", c.variant.module_name()}, {"k", c.k}, {"all_us", all}, {"masked_5_us", few},
               {"masked_100_us", full}, {"alone_us", alone}});
  }
  table.notes.push_back("masked 100%: every count is the slot count, through the masked grid's loop; valid rows alone: "
                        "one matrix of the 5% rows (the same bytes, no batch)");
  report.add(std::move(table));
  report.add_target({"masked MoE batch, 5% of the slots valid: time against one matrix of the valid rows alone",
                     fixed(worst_to_alone, 2) + "x (worst case)", "", std::nullopt, {{"ratio", worst_to_alone}}});
}

}  // namespace kiln::bench

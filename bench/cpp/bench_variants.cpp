// The quantizer family: every variant at M x K, time per launch and fraction of the copy ceiling,
// timed as the arms (batches of 10 behind a spin, inputs rotated over 2x L2).
#include <algorithm>
#include <limits>

#include "bench_device.hpp"
#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/ops/quant_launch_options.hpp"

namespace kiln::bench {

namespace {

constexpr double LARGE_ELEMENTS = 32e6;  // "M*K >= 32M", as the arms table reads it

std::size_t rounded(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// One variant's buffers at (m, k), in enough copies to span twice the L2.
struct VariantBuffers {
  VariantBuffers(GpuSession& gpu, const ops::QuantVariant& v, std::uint32_t m, std::uint32_t k)
      : x_bytes(rounded(std::size_t{m} * k * (v.silu_and_mul ? 2 : 1) * (v.input == ops::QuantInput::fp32 ? 4 : 2))),
        q_bytes(rounded(std::size_t{m} * k)),
        s_bytes(rounded(ops::quant_scales_bytes(v, m, k))),
        copies(std::max<std::size_t>(1, (2 * gpu.l2_bytes() + x_bytes + q_bytes + s_bytes - 1) / (x_bytes + q_bytes + s_bytes))),
        x(gpu.context(), x_bytes * copies),
        q(gpu.context(), q_bytes * copies),
        s(gpu.context(), s_bytes * copies) {
    // Random bf16 bits read as the variant's type stay finite: as fp16 their exponents land in the
    // normal range, as fp32 each pair is a bf16 value with a noisy mantissa.
    gpu.fill_bf16(x.get(), x.bytes() / 2, m * 2654435761u ^ k);
    gpu.flush_l2();
    gpu.synchronize();
  }
  ops::QuantArgs next(std::uint32_t m, std::uint32_t k, void* stream) {
    const std::size_t i = cursor++ % copies;
    ops::QuantArgs args;
    args.x = static_cast<const char*>(x.get()) + i * x_bytes;
    args.q = static_cast<char*>(q.get()) + i * q_bytes;
    args.scales = static_cast<char*>(s.get()) + i * s_bytes;
    args.m = m;
    args.k = k;
    args.stream = stream;
    return args;
  }
  std::size_t x_bytes, q_bytes, s_bytes, copies, cursor = 0;
  test::DeviceBuffer x, q, s;
};

double moved_bytes(const ops::QuantVariant& v, std::uint32_t m, std::uint32_t k) {
  const double in = (v.input == ops::QuantInput::fp32 ? 4.0 : 2.0) * (v.silu_and_mul ? 2 : 1);
  return static_cast<double>(m) * k * (in + 1) + static_cast<double>(ops::quant_scales_bytes(v, m, k));
}

}  // namespace

void run_variants(const BenchPlan& plan, GpuSession& gpu, double ceiling_gbps, Report& report) {
  Table table;
  table.id = "variants";
  table.title = "variants: every variant of the quantizer family, median us per launch and fraction of the copy "
                "ceiling (" + std::to_string(plan.variant_launches) +
                " launches in batches of 10 behind a spin, inputs rotated over 2x L2); bytes = input read + codes + "
                "scales written; '1g': the pick ran the one-group-per-slot kernel of a variant that ships two" +
                // Why said in the title: with the lever each launch of a batch starts while the one
                // before drains, which the copy rows cannot do.
                std::string(ops::pdl_lever() ? "; variants launched with PDL (KILN_PDL=1), the copies without" : "");
  table.columns = {"variant", "K"};
  for (std::uint32_t m : variant_ms()) table.columns.push_back("M=" + std::to_string(m));
  table.numbers = false;
  // Why a copy row per K: what any kernel moving a 16-bit variant's bytes (3MK) can reach at each
  // size, launch, ramp-up and drain included, next to the variants that move them.
  for (std::uint32_t k : variant_ks()) {
    std::vector<std::string> cells{"copy of 3MK bytes", std::to_string(k)};
    nlohmann::json record{{"variant", "copy"}, {"k", k}, {"points", nlohmann::json::array()}};
    for (std::uint32_t m : variant_ms()) {
      const double moved = 3.0 * m * k;
      const double us = copy_us(gpu, moved, plan.variant_launches);
      const double fraction = moved / (us * 1e-6) / 1e9 / ceiling_gbps;
      cells.push_back(fixed(us, 2) + " (" + fixed(100 * fraction, 0) + "%)");
      record["points"].push_back({{"m", m}, {"us", us}, {"of_ceiling", fraction}, {"bytes", moved}});
    }
    table.add(cells, record);
  }
  double worst = std::numeric_limits<double>::infinity();
  std::string worst_at;
  for (const ops::QuantVariant& v : ops::every_quant_variant()) {
    const ops::GroupQuant quant = gpu.service().group_quant(v);
    if (!quant.available()) throw_error("bench: variant " + v.module_name() + " did not load");
    for (std::uint32_t k : variant_ks()) {
      std::vector<std::string> cells{v.module_name(), std::to_string(k)};
      nlohmann::json record{{"variant", v.module_name()}, {"k", k}, {"points", nlohmann::json::array()}};
      for (std::uint32_t m : variant_ms()) {
        VariantBuffers buffers(gpu, v, m, k);
        bool one_group = false;
        const double us = time_launches_us(
            gpu, [&] { one_group = quant.launch(gpu.backend(), buffers.next(m, k, gpu.stream())).slots.one_group; },
            plan.variant_launches, v.module_name() + " M=" + std::to_string(m) + " K=" + std::to_string(k));
        const double fraction = moved_bytes(v, m, k) / (us * 1e-6) / 1e9 / ceiling_gbps;
        cells.push_back(fixed(us, 2) + " (" + fixed(100 * fraction, 0) + "%)" + (one_group ? " 1g" : ""));
        record["points"].push_back({{"m", m},
                                    {"us", us},
                                    {"of_ceiling", fraction},
                                    {"bytes", moved_bytes(v, m, k)},
                                    {"one_group", one_group}});
        if (static_cast<double>(m) * k >= LARGE_ELEMENTS && fraction < worst) {
          worst = fraction;
          worst_at = v.module_name() + " at " + std::to_string(m) + " x " + std::to_string(k);
        }
      }
      table.add(cells, record);
    }
  }
  report.add(std::move(table));
  report.add_target({"every variant, M*K >= 32e6: worst fraction of the copy ceiling",
                     fixed(100 * worst, 1) + "% (" + worst_at + ")", ">= 90%", worst >= 0.90,
                     {{"fraction", worst}, {"at", worst_at}}});
}

}  // namespace kiln::bench

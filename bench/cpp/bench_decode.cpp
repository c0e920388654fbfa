// Decode shapes (M <= 16), where a launch costs more than the work: both arms launched back to
// back through kiln and as a CUDA graph, next to an empty kernel launched the same two ways; and
// the picked arm with and without PDL queued behind a spin (issue 16's method), next to the empty
// kernel queued the same way.
#include <algorithm>
#include <cmath>

#include "bench_device.hpp"
#include "bench_kernels.hpp"
#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "driver/driver_check.hpp"
#include "driver/kernel_launch.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::bench {

namespace {

struct LaunchTimes {
  double batch_us = std::nan("");  ///< events around `batch` back-to-back stream launches, divided
  double graph_us = std::nan("");  ///< events around one replay of a graph of `batch` launches, divided
};

/// µs per launch over one batch of `enqueue` (which queues one launch on the stream it is given)
/// between two events. Why no spin ahead: host cost per launch is what these rows are meant to show.
template <class Enqueue>
double batch_us(const BenchPlan& plan, GpuSession& gpu, Enqueue& enqueue) {
  const CUevent start = gpu.event(0), stop = gpu.event(1);
  gpu.record(start);
  for (int i = 0; i < plan.decode_batch; ++i) enqueue(gpu.stream());
  gpu.record(stop);
  gpu.synchronize();
  return 1e3 * gpu.elapsed_ms(start, stop) / plan.decode_batch;
}

/// Median over the reps of batch_us(arm) / batch_us(empty), the two batches of a rep back to back.
/// Why paired: back to back, launches are host-bound, and the host's time per launch drifted by a
/// quarter within one run (3.3 to 4.3 us for the same empty kernel); a ratio of neighbours cancels
/// that drift, where two medians taken a minute apart carried it.
template <class Arm, class Empty>
double paired_batch_ratio(const BenchPlan& plan, GpuSession& gpu, Arm&& arm, Empty&& empty) {
  std::vector<double> ratios;
  for (int rep = 0; rep < plan.decode_reps; ++rep) {
    const double arm_us = batch_us(plan, gpu, arm);
    ratios.push_back(arm_us / batch_us(plan, gpu, empty));
  }
  return median(ratios);
}

/// µs per launch of `enqueue` (which queues one launch on the stream it is given), both ways.
template <class Enqueue>
LaunchTimes time_launches(const BenchPlan& plan, GpuSession& gpu, Enqueue&& enqueue) {
  const auto& api = gpu.api();
  const CUstream stream = gpu.stream();
  const CUevent start = gpu.event(0), stop = gpu.event(1);
  LaunchTimes out;

  for (int i = 0; i < plan.decode_batch; ++i) enqueue(stream);
  gpu.synchronize();
  std::vector<double> batch;
  for (int rep = 0; rep < plan.decode_reps; ++rep) batch.push_back(batch_us(plan, gpu, enqueue));
  out.batch_us = median(batch);

  CUgraph graph = nullptr;
  driver::check(api, api.cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  try {
    for (int i = 0; i < plan.decode_batch; ++i) enqueue(stream);
  } catch (...) {
    if (api.cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS && graph != nullptr) api.cuGraphDestroy(graph);
    throw;
  }
  driver::check(api, api.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  const CUresult instantiated = api.cuGraphInstantiateWithFlags(&exec, graph, 0);
  api.cuGraphDestroy(graph);
  driver::check(api, instantiated, "cuGraphInstantiateWithFlags");
  try {
    driver::check(api, api.cuGraphLaunch(exec, stream), "cuGraphLaunch");
    gpu.synchronize();
    std::vector<double> replays;
    for (int rep = 0; rep < plan.decode_reps; ++rep) {
      gpu.spin_us(100);  // Why: keeps the graph launch's own host latency out of the replay
      gpu.record(start);
      driver::check(api, api.cuGraphLaunch(exec, stream), "cuGraphLaunch");
      gpu.record(stop);
      gpu.synchronize();
      replays.push_back(1e3 * gpu.elapsed_ms(start, stop) / plan.decode_batch);
    }
    out.graph_us = median(replays);
  } catch (...) {
    api.cuGraphExecDestroy(exec);
    throw;
  }
  api.cuGraphExecDestroy(exec);
  return out;
}

std::string ratio_text(double value) { return std::isnan(value) ? "-" : fixed(value, 2) + "x"; }

}  // namespace

void run_decode(const BenchPlan& plan, GpuSession& gpu, Report& report) {
  // Why raw calls: the empty kernel is the floor of any launch; kiln's own cost per launch is
  // measured on its own (launch overhead), and the arms below pay it.
  // PDL as kiln launches it here: plain where the device or driver has none (see LaunchOptions).
  const LaunchOptions pdl{true};
  const bool pdl_runs = gpu.backend().launches_dependent(pdl);
  const auto enqueue_empty = [&](CUstream stream) { launch_empty(gpu, stream, BENCH_EMPTY, false); };
  const auto enqueue_empty_pdl = [&](CUstream stream) { launch_empty(gpu, stream, BENCH_EMPTY_PDL, pdl_runs); };
  const LaunchTimes empty_times = time_launches(plan, gpu, enqueue_empty);
  const LaunchTimes empty_pdl_times = time_launches(plan, gpu, enqueue_empty_pdl);
  // Why also queued behind a spin: back to back without one, every launch waits on the host (3-4 us
  // each on the H200's host), so the batch rows show the host's cost per launch and not what PDL
  // hides on the GPU; queued, the launches run back to back on the GPU, as issue 16 measured
  // SGLang's kernel with and without PDL.
  const double empty_queued = empty_us(gpu, plan.arm_launches);
  const double empty_pdl_queued = time_launches_us(
      gpu, [&] { enqueue_empty_pdl(gpu.stream()); }, plan.arm_launches, "the empty kernel with PDL");

  Table table;
  table.id = "decode";
  table.title = "decode: us per launch, " + std::to_string(plan.decode_batch) +
                " launches back to back on one stream (batch) and as one CUDA graph (graph), median of " +
                std::to_string(plan.decode_reps) +
                "; arms through kiln's launch, the empty kernel (grid 1, block 128) raw; PDL: the picked arm "
                "launched with programmatic dependent launch, against the empty kernel with the same "
                "grid-dependency steps launched the same way; batch ratios: median over the reps of the arm's "
                "batch over an empty kernel's batch run right after it; queued: median us per launch of " +
                std::to_string(plan.arm_launches) +
                " launches in batches of 10 queued behind a spin (as the arms table), the ratio to the "
                "empty kernel with PDL queued the same way";
  table.columns = {"M",          "K",          "shared batch",     "shared graph",     "twin batch",
                   "twin graph", "pick",       "pick/empty batch", "pick/empty graph", "pick PDL batch",
                   "pick PDL graph", "PDL/empty PDL batch", "pick queued", "pick PDL queued",
                   "PDL/empty PDL queued"};
  table.add({"empty", "-", "-", "-", "-", "-", "-", fixed(empty_times.batch_us, 2) + " us",
             fixed(empty_times.graph_us, 2) + " us", fixed(empty_pdl_times.batch_us, 2) + " us",
             fixed(empty_pdl_times.graph_us, 2) + " us", "-", fixed(empty_queued, 2) + " us",
             fixed(empty_pdl_queued, 2) + " us", "-"},
            {{"kernel", "empty"},
             {"batch_us", empty_times.batch_us},
             {"graph_us", empty_times.graph_us},
             {"pdl_batch_us", empty_pdl_times.batch_us},
             {"pdl_graph_us", empty_pdl_times.graph_us},
             {"queued_us", empty_queued},
             {"pdl_queued_us", empty_pdl_queued},
             {"pdl_in_effect", pdl_runs}});

  double worst_batch = 0, worst_graph = 0, worst_pdl = 0, worst_pdl_queued = 0;
  std::string worst_batch_shape, worst_graph_shape, worst_pdl_shape, worst_pdl_queued_shape;
  for (std::uint32_t m : arm_ms()) {
    if (m > DECODE_MAX_M) continue;
    for (std::uint32_t k : arm_ks()) {
      ShapeBuffers buffers(gpu, m, k);
      const auto arm = [&](bool twin) {
        const KernelHandle handle = twin ? gpu.quant().hopper() : gpu.quant().shared();
        return time_launches(plan, gpu,
                             [&](CUstream stream) { launch_quant(gpu, handle, twin, m, k, buffers.next(), stream); });
      };
      const LaunchTimes shared = arm(false);
      const LaunchTimes twin = gpu.quant().twin_present() ? arm(true) : LaunchTimes{};
      const bool pick_twin = gpu.quant().pick(m, k).twin;
      const LaunchTimes& picked = pick_twin ? twin : shared;
      const KernelHandle picked_handle = pick_twin ? gpu.quant().hopper() : gpu.quant().shared();
      const auto enqueue_picked = [&](CUstream stream) {
        launch_quant(gpu, picked_handle, pick_twin, m, k, buffers.next(), stream);
      };
      const auto enqueue_picked_pdl = [&](CUstream stream) {
        launch_quant(gpu, picked_handle, pick_twin, m, k, buffers.next(), stream, pdl);
      };
      const double batch_ratio = paired_batch_ratio(plan, gpu, enqueue_picked, enqueue_empty);
      const double graph_ratio = picked.graph_us / empty_times.graph_us;
      const LaunchTimes picked_pdl = time_launches(plan, gpu, enqueue_picked_pdl);
      const double pdl_ratio = paired_batch_ratio(plan, gpu, enqueue_picked_pdl, enqueue_empty_pdl);
      const double picked_queued =
          time_launches_us(gpu, [&] { enqueue_picked(gpu.stream()); }, plan.arm_launches, "the picked arm");
      const double picked_pdl_queued = time_launches_us(
          gpu, [&] { enqueue_picked_pdl(gpu.stream()); }, plan.arm_launches, "the picked arm with PDL");
      const double pdl_queued_ratio = picked_pdl_queued / empty_pdl_queued;
      const std::string shape = std::to_string(m) + " x " + std::to_string(k);
      if (pdl_ratio > worst_pdl) {
        worst_pdl = pdl_ratio;
        worst_pdl_shape = shape;
      }
      if (pdl_queued_ratio > worst_pdl_queued) {
        worst_pdl_queued = pdl_queued_ratio;
        worst_pdl_queued_shape = shape;
      }
      if (batch_ratio > worst_batch) {
        worst_batch = batch_ratio;
        worst_batch_shape = shape;
      }
      if (graph_ratio > worst_graph) {
        worst_graph = graph_ratio;
        worst_graph_shape = shape;
      }
      nlohmann::json record{{"m", m},
                            {"k", k},
                            {"shared_batch_us", shared.batch_us},
                            {"shared_graph_us", shared.graph_us},
                            {"pick", pick_twin ? "twin" : "shared"},
                            {"pick_over_empty_batch", batch_ratio},
                            {"pick_over_empty_graph", graph_ratio},
                            {"pick_pdl_batch_us", picked_pdl.batch_us},
                            {"pick_pdl_graph_us", picked_pdl.graph_us},
                            {"pick_pdl_over_empty_pdl_batch", pdl_ratio},
                            {"pick_queued_us", picked_queued},
                            {"pick_pdl_queued_us", picked_pdl_queued},
                            {"pick_pdl_over_empty_pdl_queued", pdl_queued_ratio}};
      if (gpu.quant().twin_present()) {
        record["twin_batch_us"] = twin.batch_us;
        record["twin_graph_us"] = twin.graph_us;
      }
      table.add({std::to_string(m), std::to_string(k), fixed(shared.batch_us, 2), fixed(shared.graph_us, 2),
                 fixed(twin.batch_us, 2), fixed(twin.graph_us, 2), pick_twin ? "twin" : "shared",
                 ratio_text(batch_ratio), ratio_text(graph_ratio), fixed(picked_pdl.batch_us, 2),
                 fixed(picked_pdl.graph_us, 2), ratio_text(pdl_ratio), fixed(picked_queued, 2),
                 fixed(picked_pdl_queued, 2), ratio_text(pdl_queued_ratio)},
                std::move(record));
    }
  }
  table.notes.push_back("a graph replays the same launches, so its inputs are those of " +
                        std::to_string(plan.decode_batch) +
                        " rotations and small ones stay in L2, as a decode step's activations would");
  report.add(std::move(table));

  report.add_target(
      {"decode (M <= 16), picked arm, back-to-back launches: worst ratio to the empty kernel",
       ratio_text(worst_batch) + " at " + worst_batch_shape + " (empty " + fixed(empty_times.batch_us, 2) + " us)",
       "<= 1.2x",
       worst_batch <= 1.2,
       {{"ratio", worst_batch}, {"empty_us", empty_times.batch_us}}});
  report.add_target(
      {"decode (M <= 16), picked arm, CUDA graph: worst ratio to the empty kernel",
       ratio_text(worst_graph) + " at " + worst_graph_shape + " (empty " + fixed(empty_times.graph_us, 2) + " us)",
       "<= 1.2x",
       worst_graph <= 1.2,
       {{"ratio", worst_graph}, {"empty_us", empty_times.graph_us}}});
  report.add_target(
      {"decode (M <= 16), picked arm with PDL, back-to-back launches: worst ratio to the empty kernel with PDL" +
           std::string(pdl_runs ? "" : " (PDL not in effect on this device: both launched plainly)"),
       ratio_text(worst_pdl) + " at " + worst_pdl_shape + " (empty with PDL " + fixed(empty_pdl_times.batch_us, 2) +
           " us)",
       "<= 1.0x",
       worst_pdl <= 1.0,
       {{"ratio", worst_pdl}, {"empty_pdl_us", empty_pdl_times.batch_us}, {"pdl_in_effect", pdl_runs}}});
  report.add_target(
      {"decode (M <= 16), picked arm with PDL, queued behind a spin: worst ratio to the empty kernel with PDL" +
           std::string(pdl_runs ? "" : " (PDL not in effect on this device: both launched plainly)"),
       ratio_text(worst_pdl_queued) + " at " + worst_pdl_queued_shape + " (empty with PDL " +
           fixed(empty_pdl_queued, 2) + " us)",
       "<= 1.0x",
       worst_pdl_queued <= 1.0,
       {{"ratio", worst_pdl_queued}, {"empty_pdl_us", empty_pdl_queued}, {"pdl_in_effect", pdl_runs}}});
}

}  // namespace kiln::bench

// The fresh process of the JIT measurements. It does only what it times and prints one JSON line.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench_parts.hpp"
#include "bench_stats.hpp"
#include "runtime/cuda_backend.hpp"
#include "driver/driver_api.hpp"
#include "driver/primary_context.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"

namespace kiln::bench {

namespace {

void print_line(const nlohmann::json& out) {
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

void run_jit_child(const std::string& mode, bool driver_first, std::int64_t spawned_at_ns) {
  const std::int64_t entry = now_ns();
  nlohmann::json out{
      {"mode", mode}, {"driver_first", driver_first}, {"spawn_to_entry_ms", ms_between(spawned_at_ns, entry)}};

  // Why a pointer: the context must stay retained while the service below starts, as it would in
  // a process whose framework brought the driver up first.
  std::unique_ptr<driver::PrimaryContext> context;
  if (mode == "driver" || driver_first) {
    const std::int64_t start = now_ns();
    const driver::DriverApi& api = driver::driver_api();  // dlopen, dlsym, cuInit(0)
    const std::int64_t loaded = now_ns();
    if (!api.loaded) throw_error("bench child: " + api.load_error);
    context = std::make_unique<driver::PrimaryContext>(api, 0);
    const std::int64_t ready = now_ns();
    out["driver_ms"] = ms_between(start, loaded);
    out["context_ms"] = ms_between(loaded, ready);
    out["spawn_to_ready_ms"] = ms_between(spawned_at_ns, ready);
    if (mode == "driver") {
      print_line(out);
      return;
    }
  }

  const std::int64_t start = now_ns();
  InternalService service(0);
  const std::int64_t constructed = now_ns();
  // The default variant as kiln_quant resolves it: only the kernels its calls can run here.
  const ops::GroupQuant quant = service.group_quant(ops::QuantVariant{});
  const std::int64_t resolved = now_ns();
  const ServiceCounters counters = service.counters();
  out["service_ms"] = ms_between(start, constructed);
  out["resolve_ms"] = ms_between(constructed, resolved);
  if (driver_first) out["after_driver_ms"] = ms_between(start, resolved);
  out["spawn_to_handles_ms"] = ms_between(spawned_at_ns, resolved);
  out["compiles"] = counters.memory.compiles;
  out["compile_ms"] = counters.memory.compile_ms;
  out["disk_hits"] = counters.memory.disk_hits;
  out["family"] = quant.kernel().loaded();
  out["twin"] = quant.twin().loaded();
  if (!quant.available()) {
    const std::string reason = service.backend().unavailable_reason();
    throw_error("bench child: the default variant did not load" +
                (reason.empty() ? std::string(" (the log says why)") : ": " + reason));
  }
  print_line(out);
}

}  // namespace kiln::bench

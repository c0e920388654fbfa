// kiln selftest: on a GPU, quantize a random tensor with the picked kernel, check every byte and
// scale against the CPU reference, and say which kernel ran and why. Without an NVIDIA driver it
// says so and succeeds (there is nothing to check); a driver that is there but unusable fails it,
// since on a GPU machine that is exactly what a selftest must catch.
#include <cstdio>
#include <random>
#include <vector>

#include "cli_common.hpp"
#include "commands.hpp"
#include "runtime/cuda_backend.hpp"
#include "driver/devices.hpp"
#include "driver/driver_check.hpp"
#include "driver/primary_context.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "ops/fp8_reference.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"

namespace kiln::cli {

namespace {

struct SelftestArgs {
  std::uint32_t m = 4096;
  std::uint32_t k = 7168;
};

// Device memory owned for one scope.
class Allocation {
 public:
  Allocation(const driver::DriverApi& api, std::size_t bytes) : api_(api) {
    driver::check(api_, api_.cuMemAlloc_v2(&pointer_, bytes), "cuMemAlloc");
  }
  ~Allocation() { api_.cuMemFree_v2(pointer_); }
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  void* get() const { return reinterpret_cast<void*>(pointer_); }

 private:
  const driver::DriverApi& api_;
  CUdeviceptr pointer_ = 0;
};

void run(const SelftestArgs& args) {
  const auto& api = driver::driver_api();
  const driver::GpuScan scan = driver::scan_gpus(api);
  if (scan.state == driver::DriverState::no_driver) {
    std::printf("selftest: no GPU (%s); nothing to quantize\n", scan.reason.c_str());
    return;
  }
  if (scan.state != driver::DriverState::ok)
    throw_error("selftest FAILED: the NVIDIA driver is there but unusable: " + scan.reason);
  driver::require_entries(api, {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemsetD8_v2",
                                "cuCtxSynchronize"},
                          "kiln selftest");
  InternalService service(0);
  const auto& quant = service.fp8_act_quant();
  const auto& device = service.backend().device();
  std::printf("selftest on GPU 0 (%s, target %s): shared %s, twin %s\n", device.name.c_str(),
              service.backend().target() ? service.backend().target()->name().c_str() : "none",
              quant.shared().loaded() ? "loaded" : "absent", quant.twin_present() ? "loaded" : "absent");

  const std::size_t n = std::size_t{args.m} * args.k, groups = n / 128;
  std::vector<std::uint16_t> x(n);
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.f, 3.f);
  for (auto& v : x) v = ops::float_to_bf16(normal(rng));
  std::vector<std::uint8_t> q(n), q_ref(n);
  std::vector<float> s(groups), s_ref(groups);
  ops::fp8_quantize_reference(x.data(), args.m, args.k, q_ref.data(), s_ref.data());

  const driver::PrimaryContext context(api, 0);
  const driver::ScopedCurrent current(context);
  const Allocation dx(api, n * 2), dq(api, n), ds(api, groups * 4);
  driver::check(api, api.cuMemcpyHtoD_v2(reinterpret_cast<CUdeviceptr>(dx.get()), x.data(), n * 2), "cuMemcpyHtoD");
  driver::check(api, api.cuMemsetD8_v2(reinterpret_cast<CUdeviceptr>(dq.get()), 0xCD, n), "cuMemsetD8");
  const auto chosen = quant.launch(service.backend(), dx.get(), dq.get(), static_cast<float*>(ds.get()), args.m, args.k, nullptr);
  driver::check(api, api.cuCtxSynchronize(), "cuCtxSynchronize");
  driver::check(api, api.cuMemcpyDtoH_v2(q.data(), reinterpret_cast<CUdeviceptr>(dq.get()), n), "cuMemcpyDtoH");
  driver::check(api, api.cuMemcpyDtoH_v2(s.data(), reinterpret_cast<CUdeviceptr>(ds.get()), groups * 4), "cuMemcpyDtoH");

  std::printf("m=%u k=%u: ran %s on grid (%u, %u, %u)%s%s\n", args.m, args.k,
              chosen.twin ? "the Hopper twin" : "the shared kernel", chosen.grid[0], chosen.grid[1], chosen.grid[2],
              chosen.reject ? "; twin not used: " : "",
              chosen.reject ? std::string(ops::to_string(*chosen.reject)).c_str() : "");
  if (const auto mismatch = ops::compare_fp8_outputs(q_ref.data(), s_ref.data(), q.data(), s.data(), args.m, args.k)) {
    std::printf("selftest FAILED: %s\n", ops::to_string(*mismatch).c_str());
    set_exit_code(1);
    return;
  }
  std::printf("selftest passed: all %zu bytes and %zu scales equal the CPU reference\n", n, groups);
}

}  // namespace

void add_selftest_command(CLI::App& app) {
  auto args = std::make_shared<SelftestArgs>();
  auto* cmd = app.add_subcommand("selftest", "On a GPU: quantize a random tensor and check it against the CPU reference");
  // Why kiln pick's bounds: the same launch takes them.
  cmd->add_option("--m", args->m, "Rows (default 4096)")->transform(integer_in(1, 2147483647));
  cmd->add_option("--k", args->k, "Columns, a multiple of 128 (default 7168)")
      ->transform(integer_in(ops::FP8_QUANT_GROUP, 4294967168u, ops::FP8_QUANT_GROUP));
  cmd->callback([args] { run(*args); });
}

}  // namespace kiln::cli

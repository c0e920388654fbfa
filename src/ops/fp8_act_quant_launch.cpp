#include <cstdint>
#include <string>

#include "kiln/error.hpp"
#include "kiln/gpu_backend.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/quant_launch_options.hpp"
#include "ops/fp8_act_quant_floor.hpp"
#include "ops/pointer_checks.hpp"

namespace kiln::ops {

namespace {

constexpr std::uint32_t BLOCK_THREADS = 128;

}  // namespace

void fp8_quant_require_launchable(const Fp8QuantPick& chosen, std::uint32_t m, std::uint32_t k) {
  switch (chosen.action) {
    case Fp8QuantAction::launch:
    case Fp8QuantAction::noop: return;
    case Fp8QuantAction::k_not_multiple: throw_invalid_argument("k", "a multiple of 128", std::to_string(k));
    case Fp8QuantAction::m_past_grid_x:
      throw_invalid_argument("m", "at most 2^31-1 rows (grid X limit)", std::to_string(m));
    case Fp8QuantAction::k_past_grid_y:
      throw_invalid_argument("k", "k/128 <= 65535 for the shared kernel (grid Y limit)", std::to_string(k));
    case Fp8QuantAction::twin_misaligned:
      throw_invalid_argument("x", "x and q 16-byte aligned for the Hopper twin, the only kernel here",
                             "pointers that are not");
  }
  throw_error("fp8_act_quant: unknown Fp8QuantAction");
}

Fp8QuantPick Fp8ActQuant::launch(GpuBackend& gpu, const void* x, void* q, float* scales, std::uint32_t m,
                                 std::uint32_t k, void* stream, LaunchOptions options) const {
  return launch_with(fp8_act_quant_hopper_enabled(), gpu, x, q, scales, m, k, stream, options);
}

Fp8QuantPick Fp8ActQuant::launch_with(bool requested, GpuBackend& gpu, const void* x, void* q, float* scales,
                                      std::uint32_t m, std::uint32_t k, void* stream, LaunchOptions options) const {
  // Why: the twin reads x and writes q as uint4 (16 bytes); rows stay aligned because K is a
  // multiple of 128. A null pointer counts as aligned; its own check names it.
  const bool twin_aligned = aligned(x, 16) && aligned(q, 16);
  const Fp8QuantPick chosen = pick_with(requested, m, k, sm_count_, twin_aligned);
  // Why this order: the shape's own limits, then the no-op (which needs no pointers), then the
  // pointers and the kernels, then the limits of the kernel that would run.
  if (chosen.action == Fp8QuantAction::k_not_multiple || chosen.action == Fp8QuantAction::m_past_grid_x)
    fp8_quant_require_launchable(chosen, m, k);
  if (chosen.action == Fp8QuantAction::noop) return chosen;
  require_pointer("x", x, alignof(std::uint16_t));
  require_pointer("q", q, 1);
  require_pointer("scales", scales, alignof(float));
  if (!available())
    throw_error(ErrorKind::unavailable, Retry::transient,
                "fp8_act_quant: no quantizer kernel on device " + std::to_string(gpu.device().ordinal));
  if (chosen.action == Fp8QuantAction::twin_misaligned)
    throw_invalid_argument("x", "x and q 16-byte aligned for the Hopper twin, the only kernel here",
                           "x " + pointer_text(x) + ", q " + pointer_text(q));
  fp8_quant_require_launchable(chosen, m, k);

  fp8_act_quant_note_verdict(requested, chosen.reject, m, k, sm_count_);
  launch_picked(gpu, chosen, x, q, scales, m, k, stream, options);
  return chosen;
}

void Fp8ActQuant::launch_picked(GpuBackend& gpu, const Fp8QuantPick& chosen, const void* x, void* q, float* scales,
                                std::uint32_t m, std::uint32_t k, void* stream, LaunchOptions options) const {
  std::uint32_t k_arg = k;
  std::uint32_t m_arg = m;
  // Why m: the twin's flat grid does not say where the groups end. The shared kernel, whose grid
  // does, declares only the first four, and the driver reads as many as the kernel declares.
  void* args[] = {&x, &q, &scales, &k_arg, &m_arg};
  // Why the entry swap after the pick: the PDL entry is the same kernel with the grid-dependency
  // steps, so the pick's kernel, grid and reason stand; the plain shared entry must never get PDL,
  // as it does not wait for the prior grid.
  LaunchOptions launch_options = quant_launch_options(options);
  KernelHandle kernel = chosen.kernel;
  if (launch_options.programmatic_dependent && !chosen.twin) {
    if (shared_pdl_.loaded())
      kernel = shared_pdl_;
    else
      launch_options.programmatic_dependent = false;
  }
  gpu.launch(kernel, Dim3{chosen.grid[0], chosen.grid[1], chosen.grid[2]}, Dim3{BLOCK_THREADS, 1, 1}, 0, stream,
             args, launch_options);
}

}  // namespace kiln::ops

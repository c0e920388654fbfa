#include <cstdint>
#include <string>

#include "kiln/error.hpp"
#include "kiln/gpu_backend.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::ops {

namespace {

constexpr std::uint32_t MAX_GRID_X = 0x7FFFFFFFu;
constexpr std::uint32_t BLOCK_THREADS = 128;

bool aligned(const void* pointer, std::uintptr_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
}

std::string pointer_text(const void* pointer) {
  return std::to_string(reinterpret_cast<std::uintptr_t>(pointer));
}

void require_pointer(const char* name, const void* pointer, std::uintptr_t alignment) {
  if (pointer == nullptr) throw_invalid_argument(name, "a device pointer", "null");
  if (!aligned(pointer, alignment))
    throw_invalid_argument(name, std::to_string(alignment) + "-byte alignment", "address " + pointer_text(pointer));
}

}  // namespace

Fp8QuantPick Fp8ActQuant::launch(GpuBackend& gpu, const void* x, void* q, float* scales, std::uint32_t m,
                                 std::uint32_t k, void* stream) const {
  if (k % FP8_QUANT_GROUP != 0) throw_invalid_argument("k", "a multiple of 128", std::to_string(k));
  if (m > MAX_GRID_X) throw_invalid_argument("m", "at most 2^31-1 rows (grid X limit)", std::to_string(m));
  if (m == 0 || k == 0) return pick_with(fp8_act_quant_hopper_enabled(), m, k, sm_count_);
  require_pointer("x", x, alignof(std::uint16_t));
  require_pointer("q", q, 1);
  require_pointer("scales", scales, alignof(float));
  if (!available()) throw_error("fp8_act_quant: no quantizer kernel on device " + std::to_string(gpu.device().ordinal));

  // Why: the twin reads x as uint4 (16 bytes) and writes q as uint2 (8 bytes); rows stay aligned
  // because K is a multiple of 128.
  const bool twin_aligned = aligned(x, 16) && aligned(q, 8);
  const bool requested = fp8_act_quant_hopper_enabled();
  Fp8QuantPick chosen = pick_with(requested, m, k, sm_count_, twin_aligned);
  fp8_act_quant_note_verdict(requested, chosen.reject, m, k);
  if (chosen.twin && !twin_aligned)
    throw_invalid_argument("x", "16-byte alignment (and q 8-byte) for the Hopper twin, the only kernel here",
                           "x " + pointer_text(x) + ", q " + pointer_text(q));
  if (!chosen.twin && chosen.grid[1] > FP8_QUANT_MAX_GRID_Y)
    throw_invalid_argument("k", "k/128 <= 65535 for the shared kernel (grid Y limit)", std::to_string(k));

  std::uint32_t k_arg = k;
  void* args[] = {&x, &q, &scales, &k_arg};
  gpu.launch(chosen.kernel, Dim3{chosen.grid[0], chosen.grid[1], chosen.grid[2]}, Dim3{BLOCK_THREADS, 1, 1}, 0,
             stream, args);
  return chosen;
}

}  // namespace kiln::ops

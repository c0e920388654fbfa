// kiln: variant family
// The per-token-group quantizer family's batched form (MoE): the same variants and kernel as
// per_token_group_quant.cu (per_token_group_quant.cuh), over a batch of experts with an optional
// device row count per expert.
#include "per_token_group_quant.cuh"

// A batch of experts (MoE): x [experts, t_rows, row_stride] with x_expert_stride elements between
// experts, q [experts, t_rows, k] dense, each expert's scales scale_expert_bytes apart in the
// variant's layout over t_rows (scale_rows its M extent). Grid (CTAs per expert, experts). masked_m
// (device int32 [experts], or null: every row): expert e has rows [0, min(masked_m[e], t_rows))
// (none when negative), and its other rows, padding included, are neither read nor written. Why a
// loop over the expert's CTAs: the grid is sized for the rows expected, not for t_rows, so a batch
// whose slots are mostly empty starts few idle CTAs (kiln::ops::GroupQuant::batched_grid).
extern "C" __global__ __launch_bounds__(THREADS, KILN_Q_MIN_CTAS) void per_token_group_quant_batched(
    const void* __restrict__ x, unsigned char* __restrict__ q, void* __restrict__ scales, unsigned long long t_rows,
    unsigned int groups, unsigned long long row_stride, unsigned int scale_rows, float eps, TileDivisor tiles,
    unsigned long long x_expert_stride, unsigned long long scale_expert_bytes, const int* __restrict__ masked_m) {
  // Why the wait first: the previous kernel on the stream writes masked_m (the MoE dispatch).
  kiln::pdl::enter_stream_order();
  const unsigned expert = blockIdx.y;
  unsigned long long m = t_rows;
  if (masked_m != nullptr) {
    const int valid = masked_m[expert];
    m = valid <= 0 ? 0ull : min(static_cast<unsigned long long>(valid), t_rows);
  }
  const unsigned pad_rows = masked_m != nullptr ? static_cast<unsigned>(m) : scale_rows;
  const char* x_expert = static_cast<const char*>(x) + expert * x_expert_stride * IN_BYTES;
  unsigned char* q_expert = q + expert * t_rows * groups * GROUP;
  char* scales_expert = static_cast<char*>(scales) + expert * scale_expert_bytes;
  const unsigned long long ctas = ctas_of(m, PACKED ? pad_rows : m, groups);
  for (unsigned long long cta = blockIdx.x; cta < ctas; cta += gridDim.x)
    quantize_slot<KILN_Q_ITEMS, true>(static_cast<unsigned>(cta), x_expert, q_expert, scales_expert, m, groups,
                                      row_stride, scale_rows, pad_rows, eps, tiles);
}

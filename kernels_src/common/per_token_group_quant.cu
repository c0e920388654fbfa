// kiln: variant family
// The per-token-group quantizer family, one [M, K] matrix a call: per_token_group_quant.cuh
// holds the kernel and says what each parameter means; kiln writes the variant's parameters as
// #defines in front of this file.
#include "per_token_group_quant.cuh"

// x: [m, row_stride] elements (row_stride >= k, or >= 2k with SiLU); q: [m, k] bytes;
// scales: per KILN_Q_SCALES; groups = k / GROUP; scale_rows = the M extent of column-major scales
// (m, or m padded to 4); tiles: the tiled grids' division of the CTA index by group_tiles(groups)
// (unused on the flat grid). KILN_Q_ITEMS groups per slot.
extern "C" __global__ __launch_bounds__(THREADS, KILN_Q_MIN_CTAS) void per_token_group_quant(
    const void* __restrict__ x, unsigned char* __restrict__ q, void* __restrict__ scales, unsigned long long m,
    unsigned int groups, unsigned long long row_stride, unsigned int scale_rows, float eps, TileDivisor tiles) {
  kiln::pdl::enter_stream_order();
  quantize_slot<KILN_Q_ITEMS, false>(blockIdx.x, x, q, scales, m, groups, row_stride, scale_rows, scale_rows, eps, tiles);
}

#if KILN_Q_ITEMS == 2
// The same with one group per slot, on twice the CTAs: in the modules of the variants that ship two
// (src/jit/families.cpp lists it for them), taken while the grid is small
// (kiln::ops::GroupQuant::pick_with). Why: with two a slot each thread quantizes its groups one after
// the other, and while the grid is under a few waves that serial work is the kernel's time; one
// group was 8-24% faster at 16-128 rows for the two-lane SiLU, packed and int8 group 32, and level
// from M*K >= 32M (H100; docs/performance.md, "The one-group pick"), where two won on the H200.
extern "C" __global__ __launch_bounds__(THREADS, KILN_Q_MIN_CTAS) void per_token_group_quant_one_group(
    const void* __restrict__ x, unsigned char* __restrict__ q, void* __restrict__ scales, unsigned long long m,
    unsigned int groups, unsigned long long row_stride, unsigned int scale_rows, float eps, TileDivisor tiles) {
  kiln::pdl::enter_stream_order();
  quantize_slot<1, false>(blockIdx.x, x, q, scales, m, groups, row_stride, scale_rows, scale_rows, eps, tiles);
}
#endif

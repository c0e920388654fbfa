// The per-token-group quantizer family's kernel, compiled per variant from either of its two
// module sources: per_token_group_quant.cu (one [M, K] matrix) and per_token_group_quant_batched.cu
// (a batch of experts). Why two modules: in one, the batched entry added 70% to every variant's
// compile time (sm_90a, all 180), and most callers never run it. kiln writes the variant's
// parameters as #defines in front of the module source (src/jit/families.cpp names them and their
// allowed values; `kiln list` shows them):
//   KILN_Q_IN      0 bf16, 1 fp16, 2 fp32          input element
//   KILN_Q_GROUP   32, 64, 128                      elements per group, one scale each
//   KILN_Q_OUT     0 e4m3 (+-448), 1 int8 (+-127)   output code
//   KILN_Q_SCALES  0 row-major [M, G] fp32, 1 column-major [G, M] fp32, 2 column-major with M padded
//                  to a multiple of 4 (TMA-aligned), 3 UE8M0 exponents packed four to an int32,
//                  [ceil(G/4), M padded to 4] (DeepGEMM on SM100)
//   KILN_Q_UE8M0   1: scales rounded up to a power of two
//   KILN_Q_SILU    1: x is [M, 2K]; quantize silu(x[:, :K]) * x[:, K:]
//
// Geometry: 256-thread CTAs on a 1-D grid; each group has LANES threads and each thread owns EPT
// contiguous elements (two adjacent 16-byte loads of every operand, one store of their codes). With
// row-major scales and no SiLU the grid is flat over every (row, group) pair, groups fastest, so
// consecutive CTAs stream consecutive memory. With column-major scales, or SiLU (TILED), a CTA
// takes a tile of 4 rows by TILE_GROUPS groups, rows fastest, so column-major scale stores fill
// 16-byte runs of a scale column instead of one scattered 4-byte store per group (which cost up to
// a third of the bandwidth at group 32), while each row still reads TILE_GROUPS consecutive
// groups. The numerics are
// the shared kernel's (fp8_e4m3.cuh) plus quant_numerics.cuh; the host reference compiles both.
//
// Needs x 16-byte aligned with a row stride (in elements) whose bytes are a multiple of 16, q
// aligned to EPT bytes (16 for 16-bit input, 8 for fp32) and scales 4-byte aligned
// (kiln::ops::GroupQuant checks this before launching).
#pragma once
#include "quant_numerics.cuh"
#include "grid_dependency.cuh"

#if !defined(KILN_Q_IN) || !defined(KILN_Q_GROUP) || !defined(KILN_Q_OUT) || !defined(KILN_Q_SCALES) || \
    !defined(KILN_Q_UE8M0) || !defined(KILN_Q_SILU)
#error "per_token_group_quant is a variant family: compile a variant (kiln writes its parameters)"
#endif

namespace {
constexpr unsigned THREADS = 256;
constexpr unsigned IN_BYTES = KILN_Q_IN == 2 ? 4 : 2;
constexpr unsigned VECS = 2;                      // 16-byte loads per thread per operand
constexpr unsigned VEC = 16 / IN_BYTES;           // elements per load
constexpr unsigned EPT = VECS * VEC;              // elements per thread
constexpr unsigned GROUP = KILN_Q_GROUP;
constexpr unsigned LANES = GROUP / EPT;           // threads per group: 2..16
constexpr unsigned GROUPS_PER_CTA = THREADS / LANES;
static_assert(GROUP % EPT == 0 && LANES >= 2 && LANES <= 16, "a group spans 2..16 lanes of one warp");
constexpr float QMAX = KILN_Q_OUT == 1 ? kiln::quant::INT8_MAX_CODE : kiln::fp8::E4M3_MAX;
constexpr bool COLUMN_SCALES = KILN_Q_SCALES != 0;
// Whether CTAs take tiles of rows by groups (locate) instead of runs of the flat grid: with
// column-major scales, and with SiLU whatever the scales. Why SiLU: on the tiles its row-major
// variants gained 3-9 points of the copy ceiling at every shape with M*K >= 32M, the same bytes
// (bf16 group 128: 85 -> 92% at 32768 x 7168, 82 -> 88% at 8192 x 7168; group 32 78 -> 86%;
// int8 79 -> 84%; H200, docs/performance.md, "The family kernel's geometry").
// bench/explore/family_geometry.sh overrides it.
#ifndef KILN_Q_TILED
#define KILN_Q_TILED (COLUMN_SCALES || KILN_Q_SILU)
#endif
constexpr bool TILED = KILN_Q_TILED;
constexpr bool PACKED = KILN_Q_SCALES == 3;
// Rows per tile (kiln::ops::GroupQuant::grid). Why 4 and not 8 (one whole 32-byte sector of fp32
// scales): longer runs of each row's input won over fuller scale sectors, by 0.4-1.8 points of the
// copy ceiling for every column-major and packed configuration measured, at every shape (H200;
// docs/performance.md, "The family kernel's geometry").
constexpr unsigned TILE_ROWS = 4;
constexpr unsigned TILE_GROUPS = GROUPS_PER_CTA / TILE_ROWS;
static_assert(TILE_GROUPS % 4 == 0, "a tile's groups fill whole words of the packed layout");
// Groups per slot (kiln::ops::GroupQuant::items_per_slot) and CTAs per SM the registers must allow,
// measured on the H200 at 32768 x 7168 (docs/performance.md, "The family kernel's geometry"): two
// groups per slot with all four loads issued first took 85% of the copy ceiling to 90% (row-major
// scales), 81% to 86% (column-major, group 32) and 73% to 87% (packed UE8M0); the fused SiLU, bound
// by its arithmetic, lost 5% with two and gained 2-9% from eight resident CTAs (32 registers)
// instead. Except with two lanes per group (16-bit input, group 32): there, with row-major scales,
// eight CTAs gave 55-56% and two groups per slot with four CTAs 75-80%; with column-major scales
// 74-77% and 79-82%. Not with packed UE8M0 scales: 79% went to 77% there. Once the loads allocated
// in L1 (load_stream), 16-bit input to e4m3 with fp32 column-major scales and no SiLU went the other
// way: one group and eight CTAs took group 32 from 90% to 96% and group 128 from 93% to 96%, while
// row-major layouts and int8 stayed level or lost and packed gained 1% (int8 and packed variants
// also spill at 32 registers); in kiln-bench the 16-bit variants gained 3-6 points and fp32 input
// lost 1-9. Once row-major dense rows located their group without a division (locate), the same
// held for them: group 128 went from 97% (two groups) to 102% and group 32 from 98% to 101%, while
// int8 kept two (100% against 96%). bench/explore/family_geometry.sh overrides both.
#define KILN_Q_TWO_LANE_SILU (KILN_Q_SILU && KILN_Q_GROUP == 32 && KILN_Q_IN != 2 && KILN_Q_SCALES != 3)
#define KILN_Q_ONE_GROUP_EIGHT_CTAS \
  (KILN_Q_SILU ? !KILN_Q_TWO_LANE_SILU : KILN_Q_IN != 2 && KILN_Q_OUT == 0 && KILN_Q_SCALES != 3)
#ifndef KILN_Q_ITEMS
#define KILN_Q_ITEMS (KILN_Q_ONE_GROUP_EIGHT_CTAS ? 1 : 2)
#endif
// The fused SiLU variants that spill 8-16 bytes in the 32 registers of 8 CTAs: fp16 input with
// column-major scales, and int8 with row-major scales (groups 64 and 128; ptxas, sm_90a). Why 6
// CTAs (40 registers, no spill) for them: on an H100 every one of their points got faster, 0.2-2.1%
// at M*K >= 32M and 0.5-10% below, the other 164 variants level (alternating kiln-bench rounds;
// docs/performance.md, "Six CTAs for the spilling SiLU variants"). Unmeasured on the H200, where 6
// CTAs once lost 0-3 points to 8 for the bf16 column-major SiLU, when the tiles still divided.
#define KILN_Q_SILU_SPILLS_AT_EIGHT_CTAS                                                    \
  (KILN_Q_SILU && KILN_Q_GROUP != 32 && KILN_Q_IN != 2 &&                                   \
   ((KILN_Q_IN == 1 && (KILN_Q_SCALES == 1 || KILN_Q_SCALES == 2)) || (KILN_Q_OUT == 1 && KILN_Q_SCALES == 0)))
#ifndef KILN_Q_MIN_CTAS
// Why only where 8 x 256 threads fit on an SM (sm_80, sm_90 and later); elsewhere ptxas warns and
// ignores it.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 800 || __CUDA_ARCH__ >= 900)
#define KILN_Q_MIN_CTAS \
  (KILN_Q_TWO_LANE_SILU ? 4 : KILN_Q_SILU_SPILLS_AT_EIGHT_CTAS ? 6 : KILN_Q_ONE_GROUP_EIGHT_CTAS ? 8 : 1)
#else
#define KILN_Q_MIN_CTAS 1
#endif
#endif
// Whether a group is stored once, after the NaN branch, at addresses from its CTA's tile base (the
// same for the whole CTA, so it lives in uniform registers) plus the thread's offset in the tile,
// rather than in each branch from the group's row and index. Why for the fused SiLU with fp32
// column-major scales: it holds a group in the 32 registers that 8 CTAs per SM allow, and ptxas
// computed both 64-bit store addresses ahead of the arithmetic and spilled them (8 bytes, 24 for
// int8); this way nothing spills, and at 8192 x 7168 bf16 group 128 went from 89.4 to 91.4% of the
// copy ceiling, int8 from 87.9 to 91.3% (H200; docs/performance.md, "Where the fused SiLU stores
// from"). Not elsewhere: there row-major SiLU lost 0.7 points, packed SiLU lost 3.5 with these
// addresses and stayed level with the store after the branch alone, which cost int8 group 32
// column-major 1.6-2.2 points and two-lane int8 SiLU about one.
constexpr bool STORE_FROM_TILE =
    KILN_Q_SILU && (KILN_Q_SCALES == 1 || KILN_Q_SCALES == 2) && !KILN_Q_TWO_LANE_SILU;
// From sm_80 (max.NaN finds a group's NaN), a group without NaN skips the NaN-to-lowest clamp of
// its codes: one instruction per element fewer, the same bytes, 2 points of the copy ceiling
// without SiLU and 2-4 with it (H200; docs/performance.md, "Fewer instructions per element").
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define KILN_Q_NAN_FREE_PATH 1
#else
#define KILN_Q_NAN_FREE_PATH 0
#endif
// Lane `lane` owns elements [lane * EPT, lane * EPT + EPT) of its group and stores their codes at
// once (SGLang's mapping), with loads that allocate in L1 (load_stream). Against each load
// instruction reading a contiguous 16 * LANES-byte run with L1::no_allocate, this took bf16 row-major
// group 128 from 90% to 92% of the copy ceiling, column-major group 32 from 87% to 91% and packed
// UE8M0 from 86% to 89% (32768 x 7168, H200; the same hashes); the
// SiLU variants stayed within -3..+2%.
__device__ __forceinline__ unsigned element_of(unsigned w, unsigned lane) { return (lane * VECS + w) * VEC; }
constexpr unsigned LOADS = VECS * (1 + KILN_Q_SILU);  // 16-byte loads per thread per group

__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

#if KILN_Q_IN == 1
__device__ __forceinline__ float fp16_to_float(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
#endif

// The VEC elements of one 16-byte vector as floats.
__device__ __forceinline__ void unpack(const uint4& v, float* f) {
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) {
#if KILN_Q_IN == 2
    f[j] = __uint_as_float(words[j]);
#elif KILN_Q_IN == 1
    f[2 * j] = fp16_to_float(static_cast<unsigned short>(words[j] & 0xffffu));
    f[2 * j + 1] = fp16_to_float(static_cast<unsigned short>(words[j] >> 16));
#else
    f[2 * j] = kiln::fp8::bf16_low(words[j]);
    f[2 * j + 1] = kiln::fp8::bf16_high(words[j]);
#endif
  }
}

#if KILN_Q_OUT == 1
// The int8 codes of a group's elements, four to a word (the lowest address in the low byte):
// truncation toward zero of the ratio clamped to [-128, 127], NaN to -128, as vLLM's int8 path
// and the CPU reference (src/ops/group_quant_reference.cpp) convert. fmaxf gives the lower clamp
// and maps NaN to -128, cvt.rzi.s32 truncates (a ratio past 2^31 saturates), and cvt.pack.sat.s8
// clamps the upper end while it packs two codes and shifts in the word's other half: two packs per
// four codes, where a per-code saturating convert needed a mask and a byte permute per code too
// (docs/performance.md, "Fewer instructions per element"). Why the divisor's test once for the
// slice: as
// kiln::fp8::e4m3x2_group. NAN_FREE: the ratio is not NaN, so it is above -128: no clamp.
template <bool NAN_FREE>
__device__ __forceinline__ int truncated_from_floor(float ratio) {
  int truncated;
  asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(truncated) : "f"(NAN_FREE ? ratio : fmaxf(ratio, kiln::quant::INT8_MIN_CODE)));
  return truncated;
}

// {high_half[15:0], sat(hi), sat(lo)}: lo in the low byte.
__device__ __forceinline__ unsigned int8x2_saturating(int lo, int hi, unsigned high_half) {
  unsigned packed;
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, %3;" : "=r"(packed) : "r"(hi), "r"(lo), "r"(high_half));
  return packed;
}

// Four codes in one word, `a` in the low byte.
__device__ __forceinline__ unsigned int8x4_saturating(int a, int b, int c, int d) {
  return int8x2_saturating(a, b, int8x2_saturating(c, d, 0u));
}

// Why each word is packed as soon as its four codes exist: holding all of a slice's truncated codes
// first spilled 48 bytes at 32 registers (SiLU with column-major scales) instead of 16. NAN_FREE as
// kiln::fp8::e4m3x2_group's; a scale divided element by element still clamps (inf / inf and 0 / 0
// are NaN).
template <unsigned N, typename Code>
__device__ __forceinline__ void int8x4_words(const float* f, const Code& code, unsigned* words) {
#pragma unroll
  for (unsigned j = 0; j < N; ++j)
    words[j] = int8x4_saturating(code(f[4 * j]), code(f[4 * j + 1]), code(f[4 * j + 2]), code(f[4 * j + 3]));
}

template <unsigned N, bool EXACT_RECIPROCAL, bool NAN_FREE>
__device__ __forceinline__ void int8x4_group(const float* f, const kiln::fp8::GroupDivisor& d, unsigned* words) {
  if (d.by_reciprocal)
    int8x4_words<N>(f, [&](float x) { return truncated_from_floor<NAN_FREE>(kiln::fp8::group_ratio<EXACT_RECIPROCAL>(x, d)); }, words);
  else
    int8x4_words<N>(f, [&](float x) { return truncated_from_floor<false>(__fdiv_rn(x, d.scale)); }, words);
}
#endif

// Where one group lies: `flat` = row * groups + g indexes q and the row-major scales; `x_at` is its
// first element in x; `row` and `g` are set for column-major scales only; with STORE_FROM_TILE,
// `q_in_tile` and `scale_in_tile` are this thread's code and scale offsets from its Tile.
struct Place {
  unsigned long long flat;
  unsigned long long x_at;
  unsigned row;
  unsigned g;
  unsigned long long q_in_tile;
  unsigned long long scale_in_tile;
};

// The groups a tile row spans: the packed layout's tiles also cover its padding up to a whole word.
__device__ __forceinline__ unsigned tiled_groups(unsigned groups) { return PACKED ? (groups + 3) / 4 * 4 : groups; }

__device__ __forceinline__ unsigned group_tiles(unsigned groups) {
  return (tiled_groups(groups) + TILE_GROUPS - 1) / TILE_GROUPS;
}

// floor(n / group_tiles(groups)) for n < 2^31, as (n * multiplier) >> shift with the host's
// kiln::ops::TileDivisor: two integer instructions where the division by a run-time value took 40
// of the 72-79 instructions before a thread's first load (fused SiLU). On the H200 with PDL, against
// the division, in one session (docs/performance.md, "The tile multiplier"): the 16-bit fused SiLU
// 2.5% faster at M*K >= 32M (bf16 group 128 column-major at 2048 x 18432: 88% -> 90-91% of the copy
// ceiling), the tiled variants 2-7% faster at M <= 16, but at about one wave of CTAs (2048 x 2048,
// 128 x 18432) the median variant 1.5-1.7% slower, the worst 15%. Why not a 2-D grid, which
// needs no division either: the same kernel on (a row's tiles, row tiles) was 3-7% slower at
// shapes of about one wave (16-bit SiLU at 2048 x 2048 and 128 x 18432, H100 with PDL).
struct TileDivisor {
  unsigned multiplier;
  unsigned shift;
};

// Where a CTA and a thread are: on the tiled grids the CTA's row tile and tile column (a row's
// tiles are consecutive CTAs), on the flat grid its index alone.
struct Coordinates {
  unsigned cta;
  unsigned row_tile;
  unsigned tile_column;
  unsigned thread;
};
__device__ __forceinline__ Coordinates coordinates_of(unsigned cta, unsigned thread, unsigned groups, TileDivisor tiles) {
  const unsigned row_tile = static_cast<unsigned>((static_cast<unsigned long long>(cta) * tiles.multiplier) >> tiles.shift);
  return {cta, row_tile, cta - row_tile * group_tiles(groups), thread};
}
// The same, from the CTA and thread indices read again in a way ptxas cannot merge with the first
// read, for the stores. Why: a group's store places, held from its loads through its arithmetic,
// spilled 12-20 bytes at the 32 registers of 8 CTAs per SM (16-bit column-major e4m3 and packed
// SiLU variants, once the division above was gone); computed again after the arithmetic nothing
// spills (ptxas, sm_90a).
__device__ __forceinline__ Coordinates coordinates_again(unsigned groups, TileDivisor tiles) {
  unsigned cta, thread;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(cta));
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(thread));
  return coordinates_of(cta, thread, groups, tiles);
}
// The same on the batched kernel's loop, whose CTA index is the loop's and not %ctaid.x.
__device__ __forceinline__ Coordinates coordinates_again(unsigned cta, unsigned groups, TileDivisor tiles) {
  unsigned again, thread;
  asm volatile("mov.u32 %0, %1;" : "=r"(again) : "r"(cta));
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(thread));
  return coordinates_of(again, thread, groups, tiles);
}

// The code and scale offsets of this CTA's tile's first group (STORE_FROM_TILE).
struct Tile {
  unsigned long long q;
  unsigned long long scale;
};
template <unsigned ITEMS>
__device__ __forceinline__ Tile tile_of_cta(const Coordinates& c, unsigned groups, unsigned scale_rows) {
  const unsigned long long row = static_cast<unsigned long long>(c.row_tile) * ITEMS * TILE_ROWS;
  const unsigned g = c.tile_column * TILE_GROUPS;
  return {(row * groups + g) * GROUP, static_cast<unsigned long long>(g) * scale_rows + row};
}

// Where this thread's slot's item `item` (0 .. ITEMS-1) lies: false past the end. Flat: the grid
// over every (row, group) pair, groups fastest, items GROUPS_PER_CTA apart. Tiled (TILED): a tile
// of TILE_ROWS * ITEMS rows by TILE_GROUPS groups, rows fastest, items
// TILE_ROWS rows apart; the packed layout's tiles also cover its padding (rows up to m padded to 4,
// groups up to a whole word), which they write as zeros so a TMA load of the tile reads no garbage.
// Why no division for dense rows without SiLU: there x_at is flat * GROUP, as in the twin, and a
// 64-bit division on every thread's way to its first load cost 5-10 points of the copy ceiling
// (bf16 group 128, two groups per slot: 92% -> 97% at 32768 x 7168, 81% -> 87% at 2048 x 18432,
// H200; docs/performance.md, "The family kernel's geometry").
// ZERO_PADDING: write the packed layout's padding (once, on the way to the loads) in rows below
// `pad_rows`: scale_rows, or on a masked batch the expert's valid rows (the rest stay untouched).
template <unsigned ITEMS, bool ZERO_PADDING>
__device__ __forceinline__ bool locate(const Coordinates& c, unsigned item, unsigned long long m, unsigned groups,
                                       unsigned long long row_stride, unsigned scale_rows, unsigned pad_rows,
                                       void* scales, Place& at) {
  const unsigned slot = c.thread / LANES;
  const unsigned lane = c.thread % LANES;
  if constexpr (TILED) {
    at.row = (c.row_tile * ITEMS + item) * TILE_ROWS + slot % TILE_ROWS;
    at.g = c.tile_column * TILE_GROUPS + slot / TILE_ROWS;
    if (ZERO_PADDING && PACKED && (at.row >= m || at.g >= groups) && lane == 0 && at.row < pad_rows && at.g < tiled_groups(groups))
      static_cast<unsigned char*>(scales)[(static_cast<unsigned long long>(at.g / 4) * scale_rows + at.row) * 4 + at.g % 4] = 0;
    at.flat = static_cast<unsigned long long>(at.row) * groups + at.g;
    at.x_at = static_cast<unsigned long long>(at.row) * row_stride + static_cast<unsigned long long>(at.g) * GROUP;
    if constexpr (STORE_FROM_TILE) {
      const unsigned long long row_in_tile = item * TILE_ROWS + slot % TILE_ROWS;
      const unsigned g_in_tile = slot / TILE_ROWS;
      at.q_in_tile = (row_in_tile * groups + g_in_tile) * GROUP + lane * EPT;
      at.scale_in_tile = static_cast<unsigned long long>(g_in_tile) * scale_rows + row_in_tile;
    }
    return at.row < m && at.g < groups;
  } else {
    at.flat = (static_cast<unsigned long long>(c.cta) * ITEMS + item) * GROUPS_PER_CTA + slot;
    if (at.flat >= m * groups) return false;
    if (!KILN_Q_SILU && row_stride == static_cast<unsigned long long>(groups) * GROUP)
      at.x_at = at.flat * GROUP;
    else
      at.x_at = at.flat / groups * row_stride + at.flat % groups * GROUP;
    return true;
  }
}

// The scale and the codes (four to a word) of one group's slice f, whose group max over the LANES
// lanes is `absmax`. NAN_FREE: no f[j] of the group is NaN.
template <bool NAN_FREE>
__device__ __forceinline__ float group_codes(const float* f, float absmax, float eps, unsigned (&words)[EPT / 4]) {
  float scale = __fdiv_rn(fmaxf(absmax, eps), QMAX);
#if KILN_Q_UE8M0
  scale = kiln::quant::ue8m0_scale(scale);
#endif
  const kiln::fp8::GroupDivisor divisor = kiln::fp8::divisor_of_scale(scale);
#if KILN_Q_OUT == 1
  int8x4_group<EPT / 4, KILN_Q_UE8M0 != 0, NAN_FREE>(f, divisor, words);
#else
  unsigned pairs[EPT / 2];
  kiln::fp8::e4m3x2_group<EPT / 2, KILN_Q_UE8M0 != 0, NAN_FREE>(f, divisor, pairs);
#pragma unroll
  for (unsigned j = 0; j < EPT / 4; ++j) words[j] = pairs[2 * j] | (pairs[2 * j + 1] << 16);
#endif
  return scale;
}

// Stores a group's codes, and from lane 0 its scale in its layout.
__device__ __forceinline__ void store_group(const unsigned (&words)[EPT / 4], float scale, const Place& at,
                                            const Tile& tile, unsigned lane, unsigned scale_rows, unsigned char* q,
                                            void* scales) {
  unsigned char* q_group = STORE_FROM_TILE ? q + tile.q + at.q_in_tile : q + at.flat * GROUP + lane * EPT;
  if constexpr (VEC == 8) {
    *reinterpret_cast<uint4*>(q_group) = make_uint4(words[0], words[1], words[2], words[3]);
  } else {
    *reinterpret_cast<uint2*>(q_group) = make_uint2(words[0], words[1]);
  }

  if (lane != 0) return;
#if KILN_Q_SCALES == 0
  static_cast<float*>(scales)[at.flat] = scale;
#elif KILN_Q_SCALES == 1 || KILN_Q_SCALES == 2
  static_cast<float*>(scales)[STORE_FROM_TILE ? tile.scale + at.scale_in_tile
                                              : static_cast<unsigned long long>(at.g) * scale_rows + at.row] = scale;
#else
  const unsigned long long word = static_cast<unsigned long long>(at.g / 4) * scale_rows + at.row;
  static_cast<unsigned char*>(scales)[word * 4 + at.g % 4] = static_cast<unsigned char>(kiln::quant::ue8m0_exponent(scale));
#endif
}

// max |f| over the group's LANES lanes (`mask`); KEEP_NAN: NaN when any of them is.
template <bool KEEP_NAN>
__device__ __forceinline__ float group_max(const float* f, unsigned mask) {
  float m = kiln::fp8::max_magnitude<EPT, KEEP_NAN>(f);
#pragma unroll
  for (unsigned offset = LANES / 2; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(mask, m, offset);
    m = KEEP_NAN ? kiln::fp8::fmax_keeping_nan(m, other) : fmaxf(m, other);
  }
  return m;
}

// One group's slice: f from the loads in `in` (with SiLU, gate then up per vector), its group max,
// its codes, then its stores at item `item`'s place.
template <unsigned ITEMS, bool BATCHED>
__device__ __forceinline__ void quantize_group(const uint4 (&in)[LOADS], unsigned cta, unsigned item, unsigned long long m,
                                               unsigned groups, TileDivisor tiles, unsigned long long row_stride,
                                               const Tile& tile,
                                               unsigned lane, unsigned mask, unsigned scale_rows, float eps,
                                               unsigned char* q, void* scales) {
  float f[EPT];
#pragma unroll
  for (unsigned w = 0; w < VECS; ++w) {
#if KILN_Q_SILU
    float gate[VEC], up[VEC];
    unpack(in[2 * w], gate);
    unpack(in[2 * w + 1], up);
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) f[w * VEC + j] = kiln::quant::silu_and_mul(gate[j], up[j]);
#else
    unpack(in[w], f + w * VEC);
#endif
  }

  unsigned words[EPT / 4];
  float scale;
  Place at;
  // Why again only on the tiles: on the flat grid the loads' place is the stores' (ptxas keeps it,
  // and nothing spills there).
  const Coordinates where = !TILED ? coordinates_of(cta, threadIdx.x, groups, tiles)
                            : BATCHED ? coordinates_again(cta, groups, tiles) : coordinates_again(groups, tiles);
  locate<ITEMS, false>(where, item, m, groups, row_stride, scale_rows, scale_rows, scales, at);
#if KILN_Q_NAN_FREE_PATH
  // The max keeping NaN: a group without NaN (its lanes agree, so the branch is the group's) skips
  // the NaN clamp; a group with NaN takes its max again, dropping NaN, as the scale needs.
  const float absmax_or_nan = group_max<true>(f, mask);
  if (absmax_or_nan == absmax_or_nan) {
    scale = group_codes<true>(f, absmax_or_nan, eps, words);
    // Why a store in this branch too, except with STORE_FROM_TILE: one store after the branch
    // cost the other variants up to 2 points (see STORE_FROM_TILE).
    if constexpr (!STORE_FROM_TILE) {
      store_group(words, scale, at, tile, lane, scale_rows, q, scales);
      return;
    }
  } else
#endif
  {
    scale = group_codes<false>(f, group_max<false>(f, mask), eps, words);
  }
  store_group(words, scale, at, tile, lane, scale_rows, q, scales);
}
// CTA `cta`'s groups (BATCHED: an iteration of the batched kernel's loop). Every item's loads are
// issued before the first item is quantized.
template <unsigned ITEMS, bool BATCHED>
__device__ __forceinline__ void quantize_slot(unsigned cta, const void* __restrict__ x, unsigned char* __restrict__ q,
                                              void* __restrict__ scales, unsigned long long m, unsigned groups,
                                              unsigned long long row_stride, unsigned scale_rows, unsigned pad_rows,
                                              float eps, TileDivisor tiles) {
  const Coordinates where = coordinates_of(cta, threadIdx.x, groups, tiles);
  const unsigned lane = threadIdx.x % LANES;
  // Why this mask: a warp holds 32 / LANES groups, and only a group's own lanes exchange maxima
  // (a group's lanes always agree on whether their item exists).
  const unsigned mask = ((1u << LANES) - 1u) << ((threadIdx.x % 32u) & ~(LANES - 1u));

  const Tile tile = STORE_FROM_TILE ? tile_of_cta<ITEMS>(where, groups, scale_rows) : Tile{0, 0};
  bool here[ITEMS];
  uint4 in[ITEMS][LOADS];
#pragma unroll
  for (unsigned i = 0; i < ITEMS; ++i) {
    Place at;
    here[i] = locate<ITEMS, true>(where, i, m, groups, row_stride, scale_rows, pad_rows, scales, at);
    if (!here[i]) continue;
    // Why, on the tiles, a pointer to the lane's run and constant offsets from it: the loads take
    // the offsets as immediates, where an index per load cost a 64-bit address computation each.
    // Why not on the flat grid: there ptxas gave int8 row-major 51 registers instead of 42-46 (4
    // CTAs per SM instead of 5).
    const char* x_group = static_cast<const char*>(x) + at.x_at * IN_BYTES;
    const char* x_lane = static_cast<const char*>(x) + (at.x_at + element_of(0, lane)) * IN_BYTES;
#pragma unroll
    for (unsigned w = 0; w < VECS; ++w) {
      const char* run = TILED ? x_lane + w * 16 : x_group + element_of(w, lane) * IN_BYTES;
      in[i][KILN_Q_SILU ? 2 * w : w] = load_stream(run);
      // Why k elements on: the row is [gate, up], each k wide.
      if constexpr (KILN_Q_SILU)
        in[i][2 * w + 1] = load_stream(run + static_cast<unsigned long long>(groups) * GROUP * IN_BYTES);
    }
  }
#pragma unroll
  for (unsigned i = 0; i < ITEMS; ++i)
    if (here[i])
      quantize_group<ITEMS, BATCHED>(in[i], cta, i, m, groups, tiles, row_stride, tile, lane, mask, scale_rows, eps, q,
                                     scales);
}

// The CTAs of one [m, k] matrix (kiln::ops::GroupQuant::grid): flat over its groups, or whole tiles
// over `rows` (the packed layout's padding rows included where they are written).
__device__ __forceinline__ unsigned long long ctas_of(unsigned long long m, unsigned long long rows, unsigned groups) {
  if constexpr (TILED)
    return (rows + TILE_ROWS * KILN_Q_ITEMS - 1) / (TILE_ROWS * KILN_Q_ITEMS) * group_tiles(groups);
  return (m * groups + GROUPS_PER_CTA * KILN_Q_ITEMS - 1) / (GROUPS_PER_CTA * KILN_Q_ITEMS);
}
}  // namespace


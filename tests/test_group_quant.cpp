// The quantizer family's host side: argument checks, grids, scale sizes, and the C ABI entry
// points, all without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "jit/registry.hpp"
#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "kiln/ops/group_quant.hpp"

using namespace kiln;
using namespace kiln::ops;
using kiln::test::error_of;

namespace {

// Aligned stand-ins for device pointers: check() only looks at their addresses.
void* address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

QuantArgs args_for(std::uint64_t m, std::uint64_t k) {
  QuantArgs args;
  args.x = address(0x10000);
  args.q = address(0x20000);
  args.scales = address(0x30000);
  args.m = m;
  args.k = k;
  return args;
}

}  // namespace

TEST_CASE("check names the argument, what was expected and the valid range") {
  QuantVariant v;
  v.group = 64;
  CHECK(error_of([&] { GroupQuant::check(v, args_for(4, 100)); }) ==
        "invalid argument 'k': expected a multiple of the group (64), got 100");
  CHECK(error_of([&] { GroupQuant::check(v, args_for(0x80000000ull, 128)); }) ==
        "invalid argument 'm': expected at most 2^31-1 rows, got 2147483648");
  auto args = args_for(4, 128);
  args.eps = NAN;
  CHECK(error_of([&] { GroupQuant::check(v, args); }).rfind("invalid argument 'eps': expected a finite value >= 0", 0) == 0);
  args = args_for(4, 128);
  args.x_row_stride = 100;
  CHECK(error_of([&] { GroupQuant::check(v, args); }) ==
        "invalid argument 'x_row_stride': expected 0 (dense) or at least 128 elements, got 100");
  args.x_row_stride = 132;  // 264 bytes: not a multiple of 16
  CHECK(error_of([&] { GroupQuant::check(v, args); }) ==
        "invalid argument 'x_row_stride': expected a row stride whose bytes are a multiple of 16 (8 elements), got 132");
  args.x_row_stride = 136;
  CHECK_NOTHROW(GroupQuant::check(v, args));
  v.silu_and_mul = true;  // x is [m, 2k]
  args.x_row_stride = 136;
  CHECK(error_of([&] { GroupQuant::check(v, args); }) ==
        "invalid argument 'x_row_stride': expected 0 (dense) or at least 256 elements, got 136");
  args = args_for(4, 128);
  args.x = address(0x10008);
  CHECK(error_of([&] { GroupQuant::check(v, args); }) == "invalid argument 'x': expected 16-byte alignment, got address 65544");
  args = args_for(4, 128);
  args.q = address(0x20008);
  CHECK(error_of([&] { GroupQuant::check(v, args); }) == "invalid argument 'q': expected 16-byte alignment, got address 131080");
  v.input = QuantInput::fp32;  // fp32 input writes 8-byte runs of q
  CHECK_NOTHROW(GroupQuant::check(v, args));
  args.q = address(0x20004);
  CHECK(error_of([&] { GroupQuant::check(v, args); }) == "invalid argument 'q': expected 8-byte alignment, got address 131076");
  args.q = address(0x20008);
  args.scales = nullptr;
  CHECK(error_of([&] { GroupQuant::check(v, args); }) == "invalid argument 'scales': expected a device pointer, got null");
  // A row of more than 2^31-1 groups is the row's fault, not m's.
  CHECK(error_of([&] { GroupQuant::check(v, args_for(1, 64ull << 31)); }) ==
        "invalid argument 'k': expected at most 2^31-1 groups (k / group) per row, got 137438953472");
  CHECK_NOTHROW(GroupQuant::check(v, args_for(1, 64ull * 0x7FFFFFFF)));
  // An empty shape needs no pointers.
  QuantArgs empty;
  empty.k = 128;
  CHECK_NOTHROW(GroupQuant::check(v, empty));
  v.ue8m0 = false;
  v.scales = QuantScales::ue8m0_packed;
  CHECK(error_of([&] { GroupQuant::check(v, args_for(4, 128)); }).find("needs ue8m0=1") != std::string::npos);
}

TEST_CASE("the family grid covers every group, and the packed layout's padding words") {
  QuantVariant bf16{};  // 8 lanes per 128-group: 32 group slots per CTA, 1 group each for e4m3
  CHECK(GroupQuant::groups_per_cta(bf16) == 32);
  CHECK(GroupQuant::items_per_slot(bf16) == 1);
  CHECK(GroupQuant::grid(bf16, 1, 7168) == std::array<std::uint32_t, 3>{2, 1, 1});  // 56 groups
  CHECK(GroupQuant::grid(bf16, 2, 7168) == std::array<std::uint32_t, 3>{4, 1, 1});  // 112 groups
  CHECK(GroupQuant::grid(bf16, 32768, 7168) == std::array<std::uint32_t, 3>{57344, 1, 1});
  bf16.output = QuantOutput::int8;  // int8: two groups per slot
  CHECK(GroupQuant::items_per_slot(bf16) == 2);
  CHECK(GroupQuant::grid(bf16, 1, 7168) == std::array<std::uint32_t, 3>{1, 1, 1});
  CHECK(GroupQuant::grid(bf16, 32768, 7168) == std::array<std::uint32_t, 3>{28672, 1, 1});
  QuantVariant silu{};
  silu.silu_and_mul = true;  // bound by its arithmetic: one group per slot
  CHECK(GroupQuant::items_per_slot(silu) == 1);
  CHECK(GroupQuant::grid(silu, 32768, 7168) == std::array<std::uint32_t, 3>{57344, 1, 1});
  // SiLU takes tiles of 4 rows x 8 groups whatever the scales: one row of 56 groups is 7 tiles,
  // where the flat grid of 32 groups per CTA would be 2 CTAs.
  CHECK(GroupQuant::grid(silu, 1, 7168) == std::array<std::uint32_t, 3>{7, 1, 1});
  CHECK(GroupQuant::grid(silu, 5, 7168) == std::array<std::uint32_t, 3>{14, 1, 1});
  QuantVariant small{};
  small.group = 32;  // 2 lanes: 128 groups per CTA
  CHECK(GroupQuant::groups_per_cta(small) == 128);
  // Two lanes per group: two groups per slot with SiLU too (measured faster, but for packed scales).
  small.silu_and_mul = true;
  CHECK(GroupQuant::items_per_slot(small) == 2);
  CHECK(GroupQuant::grid(small, 32768, 2048) == std::array<std::uint32_t, 3>{8192, 1, 1});  // 64 groups a row
  small.input = QuantInput::fp16;
  CHECK(GroupQuant::items_per_slot(small) == 2);
  small.input = QuantInput::fp32;  // 4 lanes per 32-group
  CHECK(GroupQuant::items_per_slot(small) == 1);
  small.input = QuantInput::bf16;
  small.group = 64;  // 4 lanes
  CHECK(GroupQuant::items_per_slot(small) == 1);
  small.group = 32;
  small.scales = QuantScales::column_major;
  CHECK(GroupQuant::items_per_slot(small) == 2);
  small.scales = QuantScales::ue8m0_packed;  // measured slower with two: one, as at four lanes
  small.ue8m0 = true;
  CHECK(GroupQuant::items_per_slot(small) == 1);
  QuantVariant wide{};
  wide.input = QuantInput::fp32;  // 8 elements per thread: 16 lanes per 128-group
  CHECK(GroupQuant::groups_per_cta(wide) == 16);
  QuantVariant packed{};
  packed.scales = QuantScales::ue8m0_packed;
  packed.ue8m0 = true;
  // Column-major layouts take tiles of 8 rows (4 per item) x (32 / 4) groups: m = 5 padded to 8
  // rows, G = 12: 1 row tile x 2 group tiles.
  CHECK(GroupQuant::grid(packed, 5, 1536) == std::array<std::uint32_t, 3>{2, 1, 1});
  CHECK(GroupQuant::grid(packed, 9, 768) == std::array<std::uint32_t, 3>{2, 1, 1});  // m = 9 padded to 12: 2 row tiles
  QuantVariant column{};
  column.group = 32;  // 128 groups per CTA; e4m3 with fp32 columns: one item, tiles of 4 rows x 32 groups
  column.scales = QuantScales::column_major;
  CHECK(GroupQuant::items_per_slot(column) == 1);
  CHECK(GroupQuant::grid(column, 100, 640) == std::array<std::uint32_t, 3>{25, 1, 1});        // G = 20: one group tile
  CHECK(GroupQuant::grid(column, 100, 32 * 40) == std::array<std::uint32_t, 3>{25 * 2, 1, 1});  // G = 40: two
  column.scales = QuantScales::column_major_tma;  // padding rows are not the kernel's to write
  CHECK(GroupQuant::grid(column, 100, 640) == std::array<std::uint32_t, 3>{25, 1, 1});
  column.output = QuantOutput::int8;  // int8: two items, tiles of 8 rows
  CHECK(GroupQuant::items_per_slot(column) == 2);
  CHECK(GroupQuant::grid(column, 100, 640) == std::array<std::uint32_t, 3>{13, 1, 1});
  column.output = QuantOutput::e4m3;
  column.silu_and_mul = true;  // two lanes a group: still two items per slot, tiles of 8 rows
  CHECK(GroupQuant::grid(column, 100, 640) == std::array<std::uint32_t, 3>{13, 1, 1});
  column.group = 64;  // four lanes with SiLU: one item per slot, tiles of 4 rows x 16 groups
  CHECK(GroupQuant::grid(column, 100, 640) == std::array<std::uint32_t, 3>{25, 1, 1});
}

TEST_CASE("the tiled grids' divisor divides every CTA index exactly") {
  const auto check_divisor = [](std::uint32_t d) {
    const TileDivisor divisor = TileDivisor::of(d);
    INFO("d = " << d);
    CHECK(divisor.multiplier != 0);
    std::vector<std::uint32_t> indices = {0, 1, d - 1, d, 0x7FFFFFFEu, 0x7FFFFFFFu};
    // The last index of each quotient and the first of the next, across the whole range, where a
    // multiplier one too small or too large shows first.
    for (std::uint64_t multiple = d; multiple <= 0x7FFFFFFFu; multiple += std::max<std::uint64_t>(d, 0x7FFFFFFFu / 4096 / d * d)) {
      indices.push_back(static_cast<std::uint32_t>(multiple - 1));
      indices.push_back(static_cast<std::uint32_t>(multiple));
    }
    for (const std::uint32_t n : indices)
      if (n <= 0x7FFFFFFFu) CHECK(divisor.divide(n) == n / d);
  };
  for (std::uint32_t d = 1; d <= 600; ++d) check_divisor(d);
  for (const std::uint32_t d : {1024u, 1025u, 4095u, 65535u, 65536u, 65537u, 1u << 24, (1u << 24) + 1, 0x3FFFFFFFu,
                                0x40000000u, 0x40000001u, 0x7FFFFFFEu, 0x7FFFFFFFu})
    check_divisor(d);
  // Every n for a few divisors the shapes use (tiles of 8 groups: K = 7168 is 7 tiles a row).
  for (const std::uint32_t d : {7u, 18u, 1152u}) {
    const TileDivisor divisor = TileDivisor::of(d);
    std::uint32_t wrong = 0;
    for (std::uint32_t n = 0; n < (1u << 22); ++n) wrong += divisor.divide(n) != n / d;
    CHECK(wrong == 0);
  }
  CHECK(error_of([] { TileDivisor::of(0); }) == "invalid argument 'd': expected a divisor from 1 to 2^31-1, got 0");
}

TEST_CASE("a row's tiles are the tiled grids' divisor") {
  QuantVariant silu{};
  silu.silu_and_mul = true;  // 32 groups per CTA: tiles of 8 groups
  CHECK(GroupQuant::tiles_per_row(silu, 7168) == 7);
  CHECK(GroupQuant::tiles_per_row(silu, 18432) == 18);
  CHECK(GroupQuant::tiles_per_row(silu, 128) == 1);
  CHECK(GroupQuant::tiles_per_row(QuantVariant{}, 7168) == 0);  // row-major without SiLU: the flat grid
  QuantVariant packed{};
  packed.scales = QuantScales::ue8m0_packed;
  packed.ue8m0 = true;
  CHECK(GroupQuant::tiles_per_row(packed, 1536) == 2);  // G = 12, tiles of 8 groups
  CHECK(GroupQuant::tiles_per_row(packed, 1152) == 2);  // G = 9 padded to 12
  QuantVariant column{};
  column.group = 32;  // 128 groups per CTA: tiles of 32 groups
  column.scales = QuantScales::column_major;
  CHECK(GroupQuant::tiles_per_row(column, 640) == 1);
  CHECK(GroupQuant::tiles_per_row(column, 32 * 40) == 2);
  // The grid is a whole number of rows of tiles.
  CHECK(GroupQuant::grid(silu, 5, 7168)[0] % GroupQuant::tiles_per_row(silu, 7168) == 0);
}

TEST_CASE("scale buffer sizes follow each layout") {
  QuantVariant v{};
  CHECK(quant_scales_bytes(v, 5, 768) == 5 * 6 * 4);
  v.scales = QuantScales::column_major;
  CHECK(quant_scales_bytes(v, 5, 768) == 6 * 5 * 4);
  v.scales = QuantScales::column_major_tma;
  CHECK(quant_scales_bytes(v, 5, 768) == 6 * 8 * 4);
  v.scales = QuantScales::ue8m0_packed;
  v.ue8m0 = true;
  CHECK(quant_scales_bytes(v, 5, 768) == 2 * 8 * 4);  // ceil(6/4) words per padded row
  // Sizes that do not fit are refused, never wrapped around to a small buffer.
  CHECK(error_of([&] { quant_scales_bytes(v, 1ull << 62, 128); }) ==
        "invalid argument 'm': expected at most 2^31-1 rows, got 4611686018427387904");
  v = QuantVariant{};
  CHECK(error_of([&] { quant_scales_bytes(v, 0x7FFFFFFF, 128ull << 40); }) ==
        "invalid argument 'k': expected a shape whose scales fit in 2^64 bytes, got 140737488355328");
  CHECK(error_of([&] { quant_scales_bytes(v, 5, 100); }) ==
        "invalid argument 'k': expected a multiple of the group (128), got 100");
}

TEST_CASE("C ABI: params start as the seed variant, and every field is checked") {
  kiln_quant_params params;
  REQUIRE(kiln_quant_params_init(&params) == KILN_OK);
  CHECK(params.struct_size == sizeof(kiln_quant_params));
  CHECK(params.input == KILN_QUANT_IN_BF16);
  CHECK(params.group == 128);
  CHECK(params.output == KILN_QUANT_OUT_E4M3);
  CHECK(params.scales == KILN_QUANT_SCALES_ROW);
  CHECK(params.eps == 1e-10f);
  std::uint64_t bytes = 0;
  REQUIRE(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_OK);
  CHECK(bytes == 120);

  params.output = 7;
  CHECK(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error()) ==
        "invalid argument 'params->output': expected 0..1 (KILN_QUANT_* constants), got 7");
  params.output = KILN_QUANT_OUT_INT8;
  params.ue8m0 = 1;
  CHECK(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error()).find("parameter 'ue8m0'") != std::string::npos);
  params.ue8m0 = 0;
  params.group = 96;
  CHECK(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error()).find("'group': expected one of 32, 64, 128, got '96'") != std::string::npos);
  params.group = 128;
  params.flags = KILN_QUANT_FLAG_PDL;
  CHECK(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_OK);
  params.flags = 2;
  CHECK(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error()) ==
        "invalid argument 'params->flags': expected a combination of KILN_QUANT_FLAG_PDL (1), got 2");
  params.flags = 0;
  params.reserved = 1;
  CHECK(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error()) ==
        "invalid argument 'params->reserved': expected 0 (reserved for later versions), got 1");
  params.reserved = 0;
  params.struct_size = 8;
  CHECK(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error()) == "invalid argument 'params->struct_size': expected at least 48, got 8");
  CHECK(kiln_quant_params_init(nullptr) == KILN_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("C ABI: without a GPU a variant is unavailable, and bad arguments are still named first") {
  kiln_service* service = nullptr;
  REQUIRE(kiln_service_create(0, &service) == KILN_OK);
  kiln_quant_params params;
  REQUIRE(kiln_quant_params_init(&params) == KILN_OK);
  params.input = KILN_QUANT_IN_FP16;
  CHECK(kiln_quant_prepare(service, &params) == KILN_ERROR_UNAVAILABLE);
  CHECK(std::string(kiln_last_error()).rfind("variant per_token_group_quant-fp16-g128-e4m3-row is not available", 0) == 0);
  CHECK(kiln_quant(service, &params, address(0x10000), address(0x20000), address(0x30000), 4, 100, nullptr) ==
        KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error()) == "invalid argument 'k': expected a multiple of the group (128), got 100");
  CHECK(kiln_quant(service, &params, address(0x10000), address(0x20000), address(0x30000), 4, 128, nullptr) ==
        KILN_ERROR_UNAVAILABLE);
  CHECK(kiln_quant(service, &params, nullptr, nullptr, nullptr, 0, 128, nullptr) == KILN_OK);  // no-op
  kiln_service_destroy(service);
}

TEST_CASE("a variant that ships two groups per slot takes its one-group kernel while the grid is small") {
  QuantVariant int8{};
  int8.output = QuantOutput::int8;  // bf16 group 128: 32 slots a CTA, two groups each
  REQUIRE(GroupQuant::items_per_slot(int8) == 2);
  // 56 groups a row: the one-group grid is 56 * m / 32 CTAs; within 64 per SM of 132 up to m = 4826.
  const QuantSlotPick small = GroupQuant::pick_with(int8, true, 16, 7168, 132);
  CHECK(small.one_group);
  CHECK(small.items == 1);
  CHECK(small.grid == GroupQuant::grid(int8, 16, 7168, 1));
  CHECK(small.grid == std::array<std::uint32_t, 3>{28, 1, 1});
  CHECK(small.reason == QuantSlotReason::small_grid);
  const QuantSlotPick edge = GroupQuant::pick_with(int8, true, 4825, 7168, 132);  // 8444 CTAs
  CHECK(edge.one_group);
  const QuantSlotPick large = GroupQuant::pick_with(int8, true, 8192, 7168, 132);  // 14336 one-group CTAs
  CHECK_FALSE(large.one_group);
  CHECK(large.items == 2);
  CHECK(large.grid == GroupQuant::grid(int8, 8192, 7168));
  CHECK(large.reason == QuantSlotReason::large_grid);
  // The ceiling exactly: k = 4096 is 32 groups a row, one CTA a row with one group per slot.
  CHECK(GroupQuant::pick_with(int8, true, 64, 4096, 1).one_group);
  CHECK(GroupQuant::pick_with(int8, true, 65, 4096, 1).reason == QuantSlotReason::large_grid);
  // The reasons in their order: a variant with one kernel, then the lever, then the SM count.
  CHECK(GroupQuant::pick_with(QuantVariant{}, false, 16, 7168, 0).reason == QuantSlotReason::one_kernel);
  CHECK(GroupQuant::pick_with(int8, false, 16, 7168, 0).reason == QuantSlotReason::lever_off);
  CHECK(GroupQuant::pick_with(int8, true, 16, 7168, 0).reason == QuantSlotReason::sm_count_unknown);
  CHECK(GroupQuant::pick_with(int8, false, 16, 7168, 132).grid == GroupQuant::grid(int8, 16, 7168));
  // The caller's choice: either kernel of a two-kernel variant, the only one of the others.
  CHECK(GroupQuant::chosen(int8, true, 8192, 7168).grid == GroupQuant::grid(int8, 8192, 7168, 1));
  CHECK(GroupQuant::chosen(int8, false, 16, 7168).items == 2);
  CHECK(GroupQuant::chosen(int8, true, 16, 7168).reason == QuantSlotReason::chosen);
  const QuantSlotPick only = GroupQuant::chosen(QuantVariant{}, true, 16, 7168);
  CHECK_FALSE(only.one_group);
  CHECK(only.reason == QuantSlotReason::one_kernel);
  CHECK(to_string(QuantSlotReason::small_grid) == "one group per slot: its grid is within 64 CTAs per SM");
}

TEST_CASE("every pick's grid is its kernel's, and only variants whose module has two kernels take the one-group one") {
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> shapes = {{1, 128},     {5, 384},     {16, 7168},
                                                                       {2048, 7168}, {8192, 7168}, {32768, 18432}};
  std::size_t one_group = 0, variants = 0, two_kernels = 0;
  for (const QuantVariant& v : every_quant_variant()) {
    ++variants;
    // The module exports the one-group kernel exactly where the grid rule says it has two.
    const KernelSource* source = find_module(v.module_name());
    REQUIRE(source != nullptr);
    const bool exports =
        std::count(source->entries.begin(), source->entries.end(), std::string(QUANT_ONE_GROUP_ENTRY)) == 1;
    CHECK(exports == (GroupQuant::items_per_slot(v) == 2));
    two_kernels += exports;
    for (const auto& [m, k] : shapes) {
      if (k % v.group != 0) continue;
      const QuantSlotPick pick = GroupQuant::pick_with(v, true, m, k, 132);
      INFO(v.module_name() << " m=" << m << " k=" << k);
      CHECK(pick.grid == GroupQuant::grid(v, m, k, pick.items));
      CHECK(pick.one_group == (pick.items == 1 && GroupQuant::items_per_slot(v) == 2));
      one_group += pick.one_group;
    }
  }
  CHECK(variants == 180);
  CHECK(two_kernels == 72);
  CHECK(one_group > 0);
}

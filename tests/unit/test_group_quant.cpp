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
#include "ops/quant_device_rule.hpp"
#include "ops/tile_divisor.hpp"
#include "quant_test_args.hpp"

using namespace kiln;
using namespace kiln::ops;
using kiln::test::address;
using kiln::test::args_for;
using kiln::test::error_of;

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

namespace {

// A call on an H200-like device (132 SMs) with both levers on, the twin in the image, the rule
// preferring the family kernel.
QuantPickInputs call(std::uint64_t m, std::uint64_t k) {
  QuantPickInputs in;
  in.m = m;
  in.k = k;
  in.sm_count = 132;
  in.twin_present = true;
  return in;
}

QuantPickReason why_not(const QuantPick& pick, QuantKernel kernel) { return pick.why_not(kernel); }

}  // namespace

TEST_CASE("a variant that ships two groups per slot takes its one-group kernel while the grid is small") {
  QuantVariant int8{};
  int8.output = QuantOutput::int8;  // bf16 group 128: 32 slots a CTA, two groups each
  REQUIRE(GroupQuant::items_per_slot(int8) == 2);
  // 56 groups a row: the one-group grid is 56 * m / 32 CTAs; within 64 per SM of 132 up to m = 4826.
  const QuantPick small = GroupQuant::pick_with(int8, call(16, 7168));
  CHECK(small.kernel == QuantKernel::family_one_group);
  CHECK(small.entry == QUANT_ONE_GROUP_ENTRY);
  CHECK(small.block == 256);
  CHECK(small.grid == GroupQuant::grid(int8, 16, 7168, 1));
  CHECK(small.grid == std::array<std::uint32_t, 3>{28, 1, 1});
  CHECK(small.reason() == QuantPickReason::one_group_small_grid);
  CHECK(why_not(small, QuantKernel::family_two_groups) == QuantPickReason::one_group_small_grid);
  CHECK(why_not(small, QuantKernel::twin) == QuantPickReason::seed_variant_only);
  CHECK(why_not(small, QuantKernel::shared) == QuantPickReason::seed_variant_only);
  CHECK(GroupQuant::pick_with(int8, call(4825, 7168)).kernel == QuantKernel::family_one_group);  // 8444 CTAs
  const QuantPick large = GroupQuant::pick_with(int8, call(8192, 7168));  // 14336 one-group CTAs
  CHECK(large.kernel == QuantKernel::family_two_groups);
  CHECK(large.entry == QUANT_ENTRY);
  CHECK(large.grid == GroupQuant::grid(int8, 8192, 7168));
  CHECK(large.reason() == QuantPickReason::one_group_large_grid);
  CHECK(why_not(large, QuantKernel::family_one_group) == QuantPickReason::one_group_large_grid);
  // The ceiling exactly: k = 4096 is 32 groups a row, one CTA a row with one group per slot.
  QuantPickInputs one_sm = call(64, 4096);
  one_sm.sm_count = 1;
  CHECK(GroupQuant::pick_with(int8, one_sm).kernel == QuantKernel::family_one_group);
  one_sm.m = 65;
  CHECK(GroupQuant::pick_with(int8, one_sm).reason() == QuantPickReason::one_group_large_grid);
  // The reasons in their order: the lever, then the SM count.
  QuantPickInputs off = call(16, 7168);
  off.one_group_lever = false;
  off.sm_count = 0;
  CHECK(GroupQuant::pick_with(int8, off).reason() == QuantPickReason::one_group_lever_off);
  off.one_group_lever = true;
  CHECK(GroupQuant::pick_with(int8, off).reason() == QuantPickReason::sm_count_unknown);
  off.one_group_lever = false;
  off.sm_count = 132;
  CHECK(GroupQuant::pick_with(int8, off).grid == GroupQuant::grid(int8, 16, 7168));
  CHECK(to_string(QuantPickReason::one_group_small_grid) == "one group per slot: its grid is within 64 CTAs per SM");
}

TEST_CASE("the default variant: the seed core decides the twin, the device's rule the shared or family kernel") {
  const QuantVariant seed{};
  // The twin where its grid reaches the floor (40 CTAs on 132 SMs: M >= 12 at K = 7168).
  const QuantPick twin = GroupQuant::pick_with(seed, call(4096, 7168));
  CHECK(twin.kernel == QuantKernel::twin);
  CHECK(twin.entry == FP8_QUANT_HOPPER_ENTRY);
  CHECK(twin.block == 128);
  CHECK(twin.grid == fp8_quant_grid(true, 4096, 7168));
  CHECK(twin.reason() == QuantPickReason::twin_fills_device);
  for (QuantKernel other : {QuantKernel::shared, QuantKernel::family_two_groups, QuantKernel::family_one_group})
    CHECK(why_not(twin, other) == QuantPickReason::twin_fills_device);
  CHECK(twin.twin_asked);
  CHECK_FALSE(twin.twin_reject.has_value());
  // Below the floor the shared kernel, whose CTAs all start at once there.
  const QuantPick small = GroupQuant::pick_with(seed, call(1, 7168));
  CHECK(small.kernel == QuantKernel::shared);
  CHECK(small.entry == FP8_QUANT_ENTRY);
  CHECK(small.grid == fp8_quant_grid(false, 1, 7168));
  CHECK(small.reason() == QuantPickReason::shared_small_grid);
  CHECK(why_not(small, QuantKernel::twin) == QuantPickReason::twin_too_few_ctas);
  CHECK(why_not(small, QuantKernel::family_one_group) == QuantPickReason::shared_small_grid);
  CHECK(why_not(small, QuantKernel::family_two_groups) == QuantPickReason::not_shipped);
  CHECK(small.twin_reject == Fp8HopperReject::too_few_ctas);
  // Without the twin the shared kernel keeps grids of up to 12 CTAs per SM: 28 rows at K = 7168 are
  // 1568 CTAs on 132 SMs (ceiling 1584), 29 rows are 1624.
  QuantPickInputs edge = call(28, 7168);
  edge.twin_present = false;
  CHECK(GroupQuant::pick_with(seed, edge).kernel == QuantKernel::shared);
  CHECK(GroupQuant::pick_with(seed, edge).reason() == QuantPickReason::shared_small_grid);
  edge.m = 29;
  CHECK(GroupQuant::pick_with(seed, edge).kernel == QuantKernel::family_one_group);
  CHECK(quant_shared_grid_is_small(28, 7168, 132));
  CHECK_FALSE(quant_shared_grid_is_small(29, 7168, 132));
  // An unknown SM count counts as one SM: 12 groups.
  CHECK(quant_shared_grid_is_small(12, 128, 0));
  CHECK_FALSE(quant_shared_grid_is_small(13, 128, 0));
  // With the twin, 12 rows reach the seed's floor (40 twin CTAs): the twin, not the shared kernel.
  CHECK(GroupQuant::pick_with(seed, call(12, 7168)).kernel == QuantKernel::twin);
  CHECK(GroupQuant::pick_with(seed, call(11, 7168)).kernel == QuantKernel::shared);
  // Above it without the twin, the device's rule: here the family kernel (one group per slot).
  QuantPickInputs no_twin = call(4096, 7168);
  no_twin.twin_present = false;
  const QuantPick large = GroupQuant::pick_with(seed, no_twin);
  CHECK(why_not(large, QuantKernel::twin) == QuantPickReason::absent);
  CHECK(large.kernel == QuantKernel::family_one_group);
  CHECK(large.entry == QUANT_ENTRY);
  CHECK(large.grid == GroupQuant::grid(seed, 4096, 7168, 1));
  CHECK(large.reason() == QuantPickReason::device_prefers_family);
  CHECK(why_not(large, QuantKernel::shared) == QuantPickReason::device_prefers_family);
  // The rule preferring the shared kernel: it runs where the twin does not.
  QuantPickInputs shared_device = no_twin;
  shared_device.prefers_shared = true;
  const QuantPick shared = GroupQuant::pick_with(seed, shared_device);
  CHECK(shared.kernel == QuantKernel::shared);
  CHECK(shared.entry == FP8_QUANT_ENTRY);
  CHECK(shared.grid == fp8_quant_grid(false, 4096, 7168));
  CHECK(shared.reason() == QuantPickReason::device_prefers_shared);
  CHECK(why_not(shared, QuantKernel::family_one_group) == QuantPickReason::device_prefers_shared);
  // ... unless it did not load: the family kernel, as the variant's only kernel left, small grids too.
  shared_device.shared_present = false;
  const QuantPick fallback = GroupQuant::pick_with(seed, shared_device);
  CHECK(fallback.kernel == QuantKernel::family_one_group);
  CHECK(why_not(fallback, QuantKernel::shared) == QuantPickReason::absent);
  CHECK(fallback.reason() == QuantPickReason::only_kernel);
  shared_device.m = 1;
  CHECK(GroupQuant::pick_with(seed, shared_device).kernel == QuantKernel::family_one_group);
  // The seed core's reject order holds: lever off, then misaligned pointers.
  QuantPickInputs lever_off = call(4096, 7168);
  lever_off.twin_lever = false;
  lever_off.twin_aligned = false;
  CHECK(why_not(GroupQuant::pick_with(seed, lever_off), QuantKernel::twin) == QuantPickReason::twin_not_requested);
  QuantPickInputs misaligned = call(4096, 7168);
  misaligned.twin_aligned = false;
  CHECK(why_not(GroupQuant::pick_with(seed, misaligned), QuantKernel::twin) == QuantPickReason::twin_misaligned);
  // A call the seed kernels cannot take (another eps, strided rows, k/128 > 65535): the family kernel.
  QuantPickInputs outside = call(4096, 7168);
  outside.seed_call = false;
  const QuantPick family = GroupQuant::pick_with(seed, outside);
  CHECK(family.kernel == QuantKernel::family_one_group);
  CHECK(family.reason() == QuantPickReason::only_kernel);
  CHECK(why_not(family, QuantKernel::twin) == QuantPickReason::outside_seed_kernels);
  CHECK(why_not(family, QuantKernel::shared) == QuantPickReason::outside_seed_kernels);
  CHECK_FALSE(family.twin_asked);
  // Nothing to do.
  CHECK(GroupQuant::pick_with(seed, call(0, 7168)).noop);
  CHECK(GroupQuant::pick_with(seed, call(16, 0)).noop);
}

TEST_CASE("which calls the seed kernels take, and the kernels each variant has") {
  QuantArgs args;
  args.m = 16;
  args.k = 7168;
  CHECK(GroupQuant::seed_call(args));
  args.x_row_stride = 7168;
  CHECK(GroupQuant::seed_call(args));
  args.x_row_stride = 7296;
  CHECK_FALSE(GroupQuant::seed_call(args));
  args.x_row_stride = 0;
  args.eps = 1e-6f;
  CHECK_FALSE(GroupQuant::seed_call(args));
  args.eps = 1e-10f;
  args.k = 65535u * 128;
  CHECK(GroupQuant::seed_call(args));
  args.k = 65536u * 128;
  CHECK_FALSE(GroupQuant::seed_call(args));
  std::size_t seed_like = 0, two_groups = 0;
  for (const QuantVariant& v : every_quant_variant()) {
    const auto kernels = quant_kernels_of(v);
    CHECK(kernels[static_cast<std::size_t>(QuantKernel::family_one_group)]);
    CHECK(kernels[static_cast<std::size_t>(QuantKernel::twin)] == kernels[static_cast<std::size_t>(QuantKernel::shared)]);
    seed_like += kernels[static_cast<std::size_t>(QuantKernel::twin)];
    two_groups += kernels[static_cast<std::size_t>(QuantKernel::family_two_groups)];
  }
  CHECK(seed_like == 1);
  CHECK(quant_kernels_of(QuantVariant{})[static_cast<std::size_t>(QuantKernel::twin)]);
  CHECK(two_groups == 72);
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
      QuantPickInputs in = call(m, k);
      in.twin_present = false;
      in.shared_present = false;  // the family kernel for every call of every variant
      const QuantPick pick = GroupQuant::pick_with(v, in);
      INFO(v.module_name() << " m=" << m << " k=" << k);
      REQUIRE(pick.family());
      const std::uint32_t items = pick.kernel == QuantKernel::family_one_group ? 1 : 2;
      CHECK(pick.grid == GroupQuant::grid(v, m, k, items));
      CHECK((pick.entry == QUANT_ONE_GROUP_ENTRY) == (items == 1 && GroupQuant::items_per_slot(v) == 2));
      one_group += pick.entry == QUANT_ONE_GROUP_ENTRY;
    }
  }
  CHECK(variants == 180);
  CHECK(two_kernels == 72);
  CHECK(one_group > 0);
}

TEST_CASE("the device rule over real GPUs: the family kernel on every one, the shared kernel only where CTA starts outrun memory") {
  // Published figures: SMs, boost clock (MHz), memory bandwidth (GB/s); the rule's inputs in the
  // driver's units are checked against them, and its verdict against the one the measurements give
  // (docs/performance.md, "The shared kernel and the family kernel").
  struct Published {
    const char* name;
    std::uint32_t sms;
    std::uint32_t mhz;
    double gb_per_s;
  };
  const std::vector<Published> table = {
      {"a100", 108, 1410, 2039}, {"l40s", 142, 2520, 864},  {"rtx4090", 128, 2520, 1008}, {"h100", 132, 1980, 3352},
      {"h200", 132, 1980, 4800}, {"b200", 148, 1965, 8000}, {"rtx5090", 170, 2407, 1792}, {"gb10", 48, 2418, 273},
  };
  REQUIRE(published_gpus().size() == table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const PublishedGpu& gpu = published_gpus()[i];
    INFO(gpu.name);
    CHECK(gpu.name == table[i].name);
    CHECK(gpu.figures.sm_count == table[i].sms);
    CHECK(gpu.figures.clock_khz == table[i].mhz * 1000);
    CHECK(std::fabs(memory_bytes_per_second(gpu.figures) / 1e9 / table[i].gb_per_s - 1) < 0.03);
    // 640 GB/s on 132 SMs at 1980 MHz, scaled by SMs x clock.
    const double shared = 640e9 * table[i].sms * table[i].mhz / (132.0 * 1980);
    CHECK(std::fabs(shared_kernel_bytes_per_second(gpu.figures) / shared - 1) < 0.02);
    CHECK_FALSE(quant_prefers_shared(gpu.figures));
  }
  // A device whose CTA starts outrun its memory by 25% takes the shared kernel; 0 (unknown) never.
  QuantDeviceFigures slow_memory{48, 2418000, 2000000, 128};  // 64 GB/s, shared ~284 GB/s
  CHECK(quant_prefers_shared(slow_memory));
  slow_memory.memory_bus_bits = 0;
  CHECK_FALSE(quant_prefers_shared(slow_memory));
  CHECK_FALSE(quant_prefers_shared(QuantDeviceFigures{}));
  CHECK(quant_device_rule_text(published_gpus()[3].figures) ==
        "shared kernel 640 GB/s (132 SMs x 1980 MHz), memory 3352 GB/s: 0.19x, below 1.25x");
  CHECK_THAT(quant_device_rule_text(QuantDeviceFigures{}), Catch::Contains("unknown"));
}

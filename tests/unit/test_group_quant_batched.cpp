// Batches of experts (QuantArgs::experts, masked_m) on the host side: the pick and its grid, the
// argument checks, scale sizes, the batched module's name, the C ABI's version-2 fields, and the
// CPU reference's untouched masked rows, all without a GPU.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "jit/variants.hpp"
#include "kiln/kiln.h"
#include "kiln/ops/group_quant.hpp"
#include "ops/group_quant_reference.hpp"
#include "quant_test_args.hpp"

using namespace kiln;
using namespace kiln::ops;
using kiln::test::error_of;

namespace {

using kiln::test::address;

QuantArgs batch_args(std::uint64_t experts, std::uint64_t m, std::uint64_t k) {
  QuantArgs args = kiln::test::args_for(m, k);
  args.experts = experts;
  return args;
}

QuantPickInputs batch_inputs(std::uint64_t experts, std::uint64_t m, std::uint64_t k, bool masked) {
  QuantPickInputs in;
  in.m = m;
  in.k = k;
  in.sm_count = 132;
  in.twin_present = true;
  in.experts = experts;
  in.masked = masked;
  return in;
}

}  // namespace

TEST_CASE("a batch runs the family's batched kernel whatever the variant, with the groups per slot it ships") {
  for (const QuantVariant& v : every_quant_variant()) {
    const QuantPick pick = GroupQuant::pick_with(v, batch_inputs(8, 512, 7168, false));
    INFO(v.module_name());
    CHECK(pick.entry == QUANT_BATCHED_ENTRY);
    CHECK(pick.block == 256);
    CHECK(!pick.twin_asked);
    CHECK(pick.kernel ==
          (GroupQuant::items_per_slot(v) == 2 ? QuantKernel::family_two_groups : QuantKernel::family_one_group));
    CHECK(pick.reason() == QuantPickReason::batched_input);
    CHECK(pick.why_not(QuantKernel::twin) == QuantPickReason::batched_input);
    CHECK(pick.why_not(QuantKernel::shared) == QuantPickReason::batched_input);
    // Unmasked: every expert's whole grid, experts on y.
    CHECK(pick.grid == std::array<std::uint32_t, 3>{GroupQuant::grid(v, 512, 7168)[0], 8, 1});
  }
  CHECK(to_string(QuantPickReason::batched_input) == "a batch of experts: the family's batched kernel runs");
  CHECK(GroupQuant::pick_with(QuantVariant{}, batch_inputs(8, 0, 7168, true)).noop);
}

TEST_CASE("a masked batch's grid is capped near 16 CTAs per SM over all experts, and never grows with the rows") {
  const QuantVariant seed;
  // DeepSeek-like: 32 local experts of 1024 slots, K 7168: each expert's whole grid is 1792 CTAs.
  CHECK(GroupQuant::grid(seed, 1024, 7168)[0] == 1792);
  CHECK(GroupQuant::batched_grid(seed, 32, 1024, 7168, true, 132) == std::array<std::uint32_t, 3>{66, 32, 1});
  CHECK(GroupQuant::batched_grid(seed, 32, 65536, 7168, true, 132)[0] == 66);
  CHECK(GroupQuant::batched_grid(seed, 32, 1024, 7168, false, 132)[0] == 1792);
  // A grid below the cap keeps its size; an unknown SM count takes the cap off.
  CHECK(GroupQuant::batched_grid(seed, 2, 4, 7168, true, 132)[0] == GroupQuant::grid(seed, 4, 7168)[0]);
  CHECK(GroupQuant::batched_grid(seed, 32, 1024, 7168, true, 0)[0] == 1792);
  CHECK(GroupQuant::pick_with(seed, batch_inputs(32, 1024, 7168, true)).grid[0] == 66);
}

TEST_CASE("a batch's arguments are checked and named") {
  const QuantVariant v;
  CHECK_NOTHROW(GroupQuant::check(v, batch_args(65535, 4, 128)));
  CHECK(error_of([&] { GroupQuant::check(v, batch_args(65536, 4, 128)); }) ==
        "invalid argument 'experts': expected 0 (one matrix) or 1 to 65535 experts, got 65536");
  auto args = batch_args(0, 4, 128);
  args.masked_m = reinterpret_cast<const std::int32_t*>(address(0x40000));
  CHECK(error_of([&] { GroupQuant::check(v, args); }) ==
        "invalid argument 'masked_m': expected null for one matrix (experts 0), or experts from 1 to 65535 for a batch, "
        "got a pointer with experts 0");
  args = batch_args(0, 4, 128);
  args.x_expert_stride = 512;
  CHECK(error_of([&] { GroupQuant::check(v, args); }) ==
        "invalid argument 'x_expert_stride': expected 0 for one matrix (experts 0), got 512");
  args = batch_args(2, 4, 128);
  args.x_expert_stride = 500;
  CHECK(error_of([&] { GroupQuant::check(v, args); }) ==
        "invalid argument 'x_expert_stride': expected 0 (dense) or at least m * the row stride (512 elements), got 500");
  args.x_expert_stride = 516;  // 1032 bytes
  CHECK(error_of([&] { GroupQuant::check(v, args); }) ==
        "invalid argument 'x_expert_stride': expected an expert stride whose bytes are a multiple of 16, got 516");
  args.x_expert_stride = 520;
  CHECK_NOTHROW(GroupQuant::check(v, args));
  args.masked_m = reinterpret_cast<const std::int32_t*>(address(0x40002));
  CHECK(error_of([&] { GroupQuant::check(v, args); }).rfind("invalid argument 'masked_m'", 0) == 0);
  args.masked_m = reinterpret_cast<const std::int32_t*>(address(0x40004));
  CHECK_NOTHROW(GroupQuant::check(v, args));
}

TEST_CASE("a batch's scales are one block per expert; its module is the batched family's") {
  const QuantVariant packed{QuantInput::bf16, 128, QuantOutput::e4m3, QuantScales::ue8m0_packed, true, false};
  CHECK(quant_scales_bytes(packed, 37, 384, 0) == quant_scales_bytes(packed, 37, 384));
  CHECK(quant_scales_bytes(packed, 37, 384, 5) == 5 * 40 * 4);  // one word of 40 (37 padded to 4) rows per expert
  CHECK(error_of([&] { quant_scales_bytes(packed, 37, 384, 70000); }) ==
        "invalid argument 'experts': expected 0 (one matrix) or 1 to 65535 experts, got 70000");
  CHECK(GroupQuant::batched_module_name(packed) == "per_token_group_quant_batched-bf16-g128-e4m3-packed-ue8m0");
  const VariantFamily* family = find_variant_family("per_token_group_quant_batched");
  REQUIRE(family != nullptr);
  CHECK(all_variants(*family).size() == 180);
  CHECK(find_variant_source(GroupQuant::batched_module_name(packed)) != nullptr);
}

TEST_CASE("C ABI: version-2 params carry the batch, and a version-1 caller gets one matrix") {
  kiln_quant_params params;
  REQUIRE(kiln_quant_params_init(&params) == KILN_OK);
  CHECK(params.struct_size == KILN_QUANT_PARAMS_V2_SIZE);
  CHECK(params.experts == 0);
  CHECK(params.masked_m == nullptr);
  params.experts = 4;
  std::uint64_t bytes = 0;
  REQUIRE(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_OK);
  CHECK(bytes == 4 * 120);
  params.struct_size = KILN_QUANT_PARAMS_V1_SIZE;  // the fields past v1 are not read
  REQUIRE(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_OK);
  CHECK(bytes == 120);
  params.struct_size = KILN_QUANT_PARAMS_V2_SIZE;
  params.experts = 65536;
  CHECK(kiln_quant_scales_bytes(&params, 5, 768, &bytes) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error()) ==
        "invalid argument 'experts': expected 0 (one matrix) or 1 to 65535 experts, got 65536");
}

TEST_CASE("the batched reference is each expert's own reference, and leaves masked rows' bytes as they were") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  const std::uint64_t experts = 3, m = 6, k = 384;
  for (const QuantVariant& v : {QuantVariant{},
                                QuantVariant{QuantInput::bf16, 128, QuantOutput::e4m3, QuantScales::ue8m0_packed, true, false},
                                QuantVariant{QuantInput::bf16, 128, QuantOutput::int8, QuantScales::column_major_tma, false, true}}) {
    const std::uint64_t stride = v.silu_and_mul ? 2 * k : k;
    std::vector<std::uint16_t> x(experts * m * stride);
    for (auto& e : x) e = static_cast<std::uint16_t>(bits(rng) & 0x3fff);  // finite bf16
    const std::uint64_t scale_bytes = quant_scales_bytes(v, m, k);
    std::vector<std::uint8_t> q(experts * m * k, 0xA5), scales(experts * scale_bytes, 0xA5);
    const std::int32_t masked[] = {2, -1, 99};
    group_quant_batched_reference(v, x.data(), experts, m, k, 0, 0, masked, 1e-10f, q.data(), scales.data());
    for (std::uint64_t e = 0; e < experts; ++e) {
      std::vector<std::uint8_t> q_one(m * k, 0xA5), s_one(scale_bytes, 0xA5);
      group_quant_reference(v, x.data() + e * m * stride, m, k, 0, 1e-10f, q_one.data(), s_one.data());
      const std::uint64_t valid = masked[e] < 0 ? 0 : std::min<std::uint64_t>(masked[e], m);
      INFO(v.module_name() << " expert " << e);
      for (std::uint64_t row = 0; row < m; ++row) {
        const bool kept = row < valid;
        const std::uint8_t* got = &q[(e * m + row) * k];
        CHECK(std::memcmp(got, kept ? &q_one[row * k] : std::vector<std::uint8_t>(k, 0xA5).data(), k) == 0);
        for (const std::uint64_t byte : quant_scale_bytes_of_row(v, m, k, row))
          CHECK(scales[e * scale_bytes + byte] == (kept ? s_one[byte] : 0xA5));
      }
    }
  }
}

// The quantizer family on a real GPU: every variant, byte for byte against the CPU reference
// (src/ops/group_quant_reference.hpp), over random inputs, odd row counts, strided rows and the
// special values; outputs poisoned before each launch so an unwritten byte fails. The seed variant's
// family kernel is checked against its seed path (shared kernel or Hopper twin) byte for byte.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "runtime/cuda_backend.hpp"
#include "ops/fp8_reference.hpp"
#include "kiln/ops/group_quant.hpp"
#include "ops/group_quant_reference.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"

using namespace kiln;
using namespace kiln::ops;

namespace {

constexpr std::uint8_t POISON = 0xA5;

struct Gpu {
  InternalService service{0};
  driver::PrimaryContext context{driver::driver_api(), 0};
};

Gpu& gpu() {
  static Gpu instance;
  return instance;
}

std::uint32_t element_bytes(QuantInput input) { return input == QuantInput::fp32 ? 4 : 2; }

// One element's bits for `value` in the variant's input type.
void store(QuantInput input, std::vector<std::uint8_t>& x, std::size_t index, float value) {
  if (input == QuantInput::fp32) {
    std::memcpy(x.data() + index * 4, &value, 4);
    return;
  }
  const std::uint16_t bits = input == QuantInput::bf16 ? float_to_bf16(value) : float_to_fp16(value);
  std::memcpy(x.data() + index * 2, &bits, 2);
}

// The special values of each type: zeros, NaN, infinities, the smallest subnormal, the largest finite.
std::vector<float> specials(QuantInput input) {
  const float tiny = input == QuantInput::fp32 ? 1.4e-45f : input == QuantInput::fp16 ? 5.96e-8f : 9.2e-41f;
  const float huge = input == QuantInput::fp16 ? 65504.f : 3.38e38f;
  return {0.f, -0.f, NAN, INFINITY, -INFINITY, tiny, -tiny, huge, -huge, 1.f, -1.f, 0.5f};
}

struct Case {
  std::uint64_t m, k, stride_pad;
  bool special;
};

// Random input: per group a magnitude over many binades (kept inside fp16's range), or with
// `special`, groups of all zeros and groups seeded with each special value.
std::vector<std::uint8_t> make_input(const QuantVariant& v, const Case& c, std::uint64_t stride, std::mt19937_64& rng) {
  std::vector<std::uint8_t> x(c.m * stride * element_bytes(v.input), 0);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int span = v.input == QuantInput::fp16 ? 8 : 20;
  std::uniform_int_distribution<int> exponent(-span, span);
  const auto special = specials(v.input);
  std::uniform_int_distribution<std::size_t> pick(0, special.size() - 1);
  for (std::uint64_t r = 0; r < c.m; ++r)
    for (std::uint64_t col = 0; col < stride; col += v.group) {
      const float scale = std::ldexp(1.f, exponent(rng));
      const bool zeros = c.special && (r + col / v.group) % 5 == 0;
      for (std::uint32_t e = 0; e < v.group && col + e < stride; ++e) {
        float value = zeros ? 0.f : normal(rng) * scale;
        if (c.special && !zeros && e % 7 == 0) value = special[pick(rng)];
        store(v.input, x, r * stride + col + e, value);
      }
    }
  return x;
}

std::string describe(const QuantVariant& v, const Case& c) {
  return v.module_name() + " m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) +
         " stride_pad=" + std::to_string(c.stride_pad) + (c.special ? " special" : "");
}

// The first differing byte of two buffers, as text; "" when equal.
std::string first_difference(const std::vector<std::uint8_t>& expected, const std::vector<std::uint8_t>& actual,
                             const char* what) {
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (expected[i] != actual[i])
      return std::string(what) + " byte " + std::to_string(i) + ": expected " + std::to_string(expected[i]) + ", got " +
             std::to_string(actual[i]);
  return {};
}

struct Outputs {
  std::vector<std::uint8_t> q, scales;
};

// Input uploaded and outputs poisoned on the test's device, and what a launch left in the outputs.
struct DeviceCall {
  test::DeviceBuffer x, q, scales;
  DeviceCall(const std::vector<std::uint8_t>& host_x, std::size_t q_bytes, std::size_t scale_bytes)
      : x(gpu().context, host_x.size()), q(gpu().context, q_bytes), scales(gpu().context, scale_bytes) {
    x.upload(host_x.data(), host_x.size());
    q.fill(POISON);
    scales.fill(POISON);
  }
  QuantArgs args() const {
    QuantArgs a;
    a.x = x.get();
    a.q = q.get();
    a.scales = scales.get();
    return a;
  }
  Outputs read() const {
    test::synchronize(gpu().context);
    Outputs out{std::vector<std::uint8_t>(q.bytes()), std::vector<std::uint8_t>(scales.bytes())};
    q.download(out.q.data(), out.q.size());
    scales.download(out.scales.data(), out.scales.size());
    return out;
  }
};

Outputs run_on_gpu(const GroupQuant& quant, const QuantVariant& v, const Case& c, const std::vector<std::uint8_t>& x,
                   std::uint64_t stride, float eps, QuantLaunch* launched = nullptr,
                   std::optional<QuantKernel> kernel = std::nullopt) {
  auto& g = gpu();
  const DeviceCall call(x, c.m * c.k, quant_scales_bytes(v, c.m, c.k));
  QuantArgs args = call.args();
  args.m = c.m;
  args.k = c.k;
  args.x_row_stride = c.stride_pad ? stride : 0;
  args.eps = eps;
  const QuantLaunch done = kernel ? quant.launch_as(g.service.backend(), args, *kernel)
                                  : quant.launch(g.service.backend(), args);
  if (launched) *launched = done;
  return call.read();
}

Outputs run_reference(const QuantVariant& v, const Case& c, const std::vector<std::uint8_t>& x, std::uint64_t stride,
                      float eps) {
  Outputs out{std::vector<std::uint8_t>(c.m * c.k, POISON), std::vector<std::uint8_t>(quant_scales_bytes(v, c.m, c.k), POISON)};
  group_quant_reference(v, x.data(), c.m, c.k, c.stride_pad ? stride : 0, eps, out.q.data(), out.scales.data());
  return out;
}

}  // namespace

TEST_CASE("every kernel of every variant of the quantizer family matches the CPU reference byte for byte") {
  auto& g = gpu();
  REQUIRE(g.service.available());
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<Case> cases = {{1, 128, 0, false}, {5, 384, 0, true}, {67, 7168, 0, false},
                                   {130, 2048, 32, false}, {9, 1024, 32, true}};
  std::size_t checked = 0;
  for (const QuantVariant& v : every_quant_variant()) {
    const GroupQuant quant = g.service.group_quant(v);
    REQUIRE(quant.available());
    for (const Case& c : cases) {
      const std::uint64_t stride = (v.silu_and_mul ? 2 * c.k : c.k) + c.stride_pad;
      const auto x = make_input(v, c, stride, rng);
      const float eps = c.special ? 1e-10f : 1e-6f;
      const Outputs expected = run_reference(v, c, x, stride, eps);
      // Why both kernels by choice: the suite's shapes are small, where the pick takes only the
      // one-group kernel of the variants that have two.
      for (const QuantKernel kernel : {QuantKernel::family_two_groups, QuantKernel::family_one_group}) {
        if (!quant_kernels_of(v)[static_cast<std::size_t>(kernel)]) continue;
        QuantLaunch launched;
        const Outputs actual = run_on_gpu(quant, v, c, x, stride, eps, &launched, kernel);
        INFO(describe(v, c) << " " << to_string(kernel));
        CHECK(launched.pick.kernel == kernel);
        CHECK(first_difference(expected.q, actual.q, "q") == "");
        CHECK(first_difference(expected.scales, actual.scales, "scales") == "");
        ++checked;
      }
    }
  }
  CHECK(checked == (180 + 72) * cases.size());  // 72 variants have two kernels
}

TEST_CASE("eps 0: all-zero groups and tiny group maxima match the CPU reference in every variant") {
  // Scales of 0 and below kiln::fp8::RECIPROCAL_MIN_SCALE, which the kernel divides element by
  // element (its reciprocal division made every code of such a group NaN).
  auto& g = gpu();
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.f, 1.f);
  const Case c{6, 1024, 0, true};
  std::size_t checked = 0;
  for (const QuantVariant& v : every_quant_variant()) {
    const std::uint64_t stride = v.silu_and_mul ? 2 * c.k : c.k;
    std::vector<std::uint8_t> x(c.m * stride * element_bytes(v.input), 0);
    // Per group: zeros, then maxima near 2^-120 and 2^-135 (subnormal; fp16 flushes them to 0,
    // which is another all-zero group), then ordinary values.
    const float magnitudes[] = {0.f, 0x1p-120f, 0x1p-135f, 1.f};
    for (std::uint64_t r = 0; r < c.m; ++r)
      for (std::uint64_t col = 0; col < stride; ++col)
        store(v.input, x, r * stride + col, normal(rng) * magnitudes[(r + col / v.group) % 4]);
    const Outputs expected = run_reference(v, c, x, stride, 0.f);
    const Outputs actual = run_on_gpu(g.service.group_quant(v), v, c, x, stride, 0.f);
    INFO(describe(v, c) + " eps=0");
    CHECK(first_difference(expected.q, actual.q, "q") == "");
    CHECK(first_difference(expected.scales, actual.scales, "scales") == "");
    ++checked;
  }
  CHECK(checked == 180);
}

TEST_CASE("the default variant: every kernel it can run writes the same bytes, and the pick's is one of them") {
  auto& g = gpu();
  const QuantVariant seed;
  const GroupQuant quant = g.service.group_quant(seed);
  std::mt19937_64 rng(std::random_device{}());
  std::size_t compared = 0;
  for (const Case& c : {Case{1, 7168, 0, false}, Case{333, 5120, 0, true}, Case{2048, 7168, 0, false}}) {
    const auto x = make_input(seed, c, c.k, rng);
    INFO(describe(seed, c));
    const Outputs expected = run_reference(seed, c, x, c.k, 1e-10f);
    QuantLaunch picked;
    const Outputs via_pick = run_on_gpu(quant, seed, c, x, c.k, 1e-10f, &picked);
    CHECK(first_difference(expected.q, via_pick.q, "q") == "");
    CHECK(first_difference(expected.scales, via_pick.scales, "scales") == "");
    for (const QuantKernel kernel : {QuantKernel::twin, QuantKernel::shared, QuantKernel::family_one_group}) {
      if (kernel == QuantKernel::twin && !quant.twin().loaded()) continue;
      QuantLaunch launched;
      const Outputs actual = run_on_gpu(quant, seed, c, x, c.k, 1e-10f, &launched, kernel);
      INFO(to_string(kernel));
      CHECK(launched.pick.kernel == kernel);
      CHECK(first_difference(expected.q, actual.q, "q") == "");
      CHECK(first_difference(expected.scales, actual.scales, "scales") == "");
      ++compared;
    }
    // The same rows with a padded stride are outside the seed kernels: the family kernel.
    const Case padded{c.m, c.k, 64, c.special};
    std::vector<std::uint8_t> wide(c.m * (c.k + 64) * 2, 0);
    for (std::uint64_t r = 0; r < c.m; ++r) std::memcpy(&wide[r * (c.k + 64) * 2], &x[r * c.k * 2], c.k * 2);
    QuantLaunch family_launch;
    const Outputs via_family = run_on_gpu(quant, seed, padded, wide, c.k + 64, 1e-10f, &family_launch);
    CHECK(family_launch.pick.kernel == QuantKernel::family_one_group);
    CHECK(first_difference(expected.q, via_family.q, "q") == "");
    CHECK(first_difference(expected.scales, via_family.scales, "scales") == "");
  }
  CHECK(compared == 3 * (quant.twin().loaded() ? 3 : 2));
}

TEST_CASE("a cold variant compiles or loads its own module once; another variant does not touch it") {
  Service service{0};
  const auto before = service.counters().memory;
  const QuantVariant a{QuantInput::fp16, 64, QuantOutput::int8, QuantScales::row_major, false, false};
  const QuantVariant b{QuantInput::fp32, 32, QuantOutput::e4m3, QuantScales::ue8m0_packed, true, true};
  auto loads = [&] {
    const auto now = service.counters().memory;
    return (now.compiles - before.compiles) + (now.disk_hits - before.disk_hits);
  };
  REQUIRE(service.group_quant(a).available());
  CHECK(loads() == 1);
  REQUIRE(service.group_quant(b).available());
  CHECK(loads() == 2);
  REQUIRE(service.group_quant(a).available());
  CHECK(loads() == 2);
}

TEST_CASE("past the pick's ceiling a two-kernel variant runs its shipped kernel, with the one-group kernel's bytes") {
  auto& g = gpu();
  const std::uint32_t sms = g.service.backend().device().sm_count;
  REQUIRE(sms > 0);
  std::mt19937_64 rng(std::random_device{}());
  const QuantVariant variants[] = {
      {QuantInput::bf16, 128, QuantOutput::int8, QuantScales::row_major, false, false},
      {QuantInput::bf16, 32, QuantOutput::e4m3, QuantScales::row_major, false, true},  // two lanes a group, tiled
      {QuantInput::fp32, 128, QuantOutput::e4m3, QuantScales::ue8m0_packed, true, false},
  };
  for (const QuantVariant& v : variants) {
    REQUIRE(GroupQuant::items_per_slot(v) == 2);
    // The smallest power-of-two row count whose one-group grid is past the ceiling, plus odd rows.
    std::uint64_t m = 64;
    const auto large = [&](std::uint64_t rows) {
      QuantPickInputs in;
      in.m = rows;
      in.k = 2048;
      in.sm_count = sms;
      return GroupQuant::pick_with(v, in).reason() == QuantPickReason::one_group_large_grid;
    };
    while (!large(m)) m *= 2;
    const Case c{m + 3, 2048, 0, false};
    REQUIRE(large(c.m));
    const std::uint64_t stride = v.silu_and_mul ? 2 * c.k : c.k;
    const auto x = make_input(v, c, stride, rng);
    const GroupQuant quant = g.service.group_quant(v);
    QuantLaunch picked, one_group;
    const Outputs expected = run_reference(v, c, x, stride, 1e-6f);
    const Outputs shipped = run_on_gpu(quant, v, c, x, stride, 1e-6f, &picked);
    const Outputs single = run_on_gpu(quant, v, c, x, stride, 1e-6f, &one_group, QuantKernel::family_one_group);
    INFO(describe(v, c));
    CHECK(picked.pick.kernel == QuantKernel::family_two_groups);
    CHECK(picked.pick.reason() == QuantPickReason::one_group_large_grid);
    CHECK(one_group.pick.entry == QUANT_ONE_GROUP_ENTRY);
    CHECK(first_difference(expected.q, shipped.q, "q") == "");
    CHECK(first_difference(expected.scales, shipped.scales, "scales") == "");
    CHECK(first_difference(shipped.q, single.q, "q") == "");
    CHECK(first_difference(shipped.scales, single.scales, "scales") == "");
  }
}

namespace {

struct Batch {
  std::uint64_t experts, m, k, expert_pad;
  std::vector<std::int32_t> masked_m;  // empty: every row of every expert
};

// One batched launch of `v` on poisoned outputs, and the CPU reference on the same poison.
std::pair<Outputs, Outputs> run_batch(const GroupQuant& quant, const QuantVariant& v, const Batch& b,
                                      std::mt19937_64& rng, QuantLaunch* launched) {
  auto& g = gpu();
  const std::uint64_t row_stride = v.silu_and_mul ? 2 * b.k : b.k;
  const std::uint64_t expert_stride = b.m * row_stride + b.expert_pad;
  const Case rows{b.experts * expert_stride / row_stride + 1, b.k, 0, true};
  const auto x = make_input(v, rows, row_stride, rng);
  const std::uint64_t scale_bytes = quant_scales_bytes(v, b.m, b.k, b.experts);
  const DeviceCall call(x, b.experts * b.m * b.k, scale_bytes);
  test::DeviceBuffer dm(g.context, 4 * std::max<std::size_t>(b.masked_m.size(), 1));
  if (!b.masked_m.empty()) dm.upload(b.masked_m.data(), 4 * b.masked_m.size());
  QuantArgs args = call.args();
  args.m = b.m;
  args.k = b.k;
  args.eps = 1e-6f;
  args.experts = b.experts;
  args.x_expert_stride = b.expert_pad != 0 ? expert_stride : 0;
  args.masked_m = b.masked_m.empty() ? nullptr : static_cast<const std::int32_t*>(dm.get());
  *launched = quant.launch(g.service.backend(), args);
  const Outputs actual = call.read();
  Outputs expected{std::vector<std::uint8_t>(actual.q.size(), POISON), std::vector<std::uint8_t>(scale_bytes, POISON)};
  group_quant_batched_reference(v, x.data(), b.experts, b.m, b.k, 0, args.x_expert_stride,
                                b.masked_m.empty() ? nullptr : b.masked_m.data(), 1e-6f, expected.q.data(),
                                expected.scales.data());
  return {expected, actual};
}

}  // namespace

TEST_CASE("batches of experts, masked and not, match the CPU reference in every variant; masked rows stay poisoned") {
  auto& g = gpu();
  std::mt19937_64 rng(std::random_device{}());
  // Counts below, at and past the rows, zero and negative (no rows); 37 rows is no multiple of 4,
  // and 3 groups leave a packed word's last byte as padding.
  const std::vector<Batch> batches = {{4, 37, 384, 0, {13, 37, 1000, -5}}, {3, 37, 384, 64, {}},
                                      {2, 6, 128, 32, {0, 5}}};
  std::size_t checked = 0;
  for (const QuantVariant& v : every_quant_variant()) {
    const GroupQuant quant = g.service.group_quant(v);
    for (const Batch& b : batches) {
      QuantLaunch launched;
      const auto [expected, actual] = run_batch(quant, v, b, rng, &launched);
      INFO(v.module_name() << " experts=" << b.experts << " m=" << b.m << " k=" << b.k
                           << (b.masked_m.empty() ? "" : " masked"));
      CHECK(launched.pick.entry == QUANT_BATCHED_ENTRY);
      CHECK(launched.pick.grid[1] == b.experts);
      CHECK(first_difference(expected.q, actual.q, "q") == "");
      CHECK(first_difference(expected.scales, actual.scales, "scales") == "");
      ++checked;
    }
  }
  CHECK(checked == 180 * batches.size());
}

TEST_CASE("a masked batch whose experts need more CTAs than the grid gives them loops over its rows") {
  auto& g = gpu();
  const std::uint32_t sms = g.service.backend().device().sm_count;
  REQUIRE(sms > 0);
  std::mt19937_64 rng(std::random_device{}());
  const QuantVariant variants[] = {
      {},  // flat grid
      {QuantInput::bf16, 128, QuantOutput::e4m3, QuantScales::column_major_tma, true, false},  // tiles
      {QuantInput::bf16, 128, QuantOutput::e4m3, QuantScales::ue8m0_packed, true, true},       // packed SiLU
      {QuantInput::fp16, 32, QuantOutput::int8, QuantScales::row_major, false, true},          // two lanes, tiled
  };
  for (const QuantVariant& v : variants) {
    // Enough experts that the cap (QUANT_MASKED_CTAS_PER_SM over all of them) is below one expert's grid.
    Batch b{256, 64, 2048, 0, {}};
    std::uniform_int_distribution<std::int32_t> count(0, 64);
    for (std::uint64_t e = 0; e < b.experts; ++e) b.masked_m.push_back(e % 3 == 0 ? 64 : count(rng));
    const GroupQuant quant = g.service.group_quant(v);
    QuantLaunch launched;
    const auto [expected, actual] = run_batch(quant, v, b, rng, &launched);
    INFO(v.module_name());
    REQUIRE(launched.pick.grid[0] < GroupQuant::grid(v, b.m, b.k)[0]);
    CHECK(first_difference(expected.q, actual.q, "q") == "");
    CHECK(first_difference(expected.scales, actual.scales, "scales") == "");
  }
}

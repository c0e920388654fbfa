#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "kiln/ops/fp8_act_quant.hpp"
#include "ops/fp8_act_quant_floor.hpp"

using namespace kiln;
using namespace kiln::ops;

TEST_CASE("reject reasons in order of precedence") {
  // 1. twin absent wins over everything.
  CHECK(fp8_act_quant_hopper_reject(true, false, true, 100000, 5120, 132) == Fp8HopperReject::absent);
  CHECK(fp8_act_quant_hopper_reject(false, false, false, 1, 128, 132) == Fp8HopperReject::absent);
  // 2. no shared kernel: the twin runs whatever the lever and the floor say.
  CHECK_FALSE(fp8_act_quant_hopper_reject(false, true, false, 1, 128, 132).has_value());
  CHECK_FALSE(fp8_act_quant_hopper_reject(true, true, false, 1, 128, 132).has_value());
  // 3. lever off beats the floor.
  CHECK(fp8_act_quant_hopper_reject(false, true, true, 1, 128, 132) == Fp8HopperReject::not_requested);
  CHECK(fp8_act_quant_hopper_reject(false, true, true, 100000, 5120, 132) == Fp8HopperReject::not_requested);
  // 4. the floor.
  CHECK(fp8_act_quant_hopper_reject(true, true, true, 15, 5120, 132) == Fp8HopperReject::too_few_ctas);
  // 5. otherwise the twin runs.
  CHECK_FALSE(fp8_act_quant_hopper_reject(true, true, true, 16, 5120, 132).has_value());
}

TEST_CASE("without a shared kernel the twin runs at every M, whatever the lever") {
  const Fp8ActQuant twin_only(KernelHandle{}, KernelHandle{5}, 132);
  for (bool requested : {true, false})
    for (std::uint32_t m : {1u, 2u, 16u, 21u, 22u, 100000u}) {
      const auto chosen = twin_only.pick_with(requested, m, 5120, 132);
      CHECK(chosen.twin);
      CHECK(chosen.kernel == KernelHandle{5});
    }
  // M = 0 runs nothing at all, not the twin: a no-op.
  CHECK(twin_only.pick_with(true, 0, 5120, 132).action == Fp8QuantAction::noop);
}

TEST_CASE("floor thresholds on a 132-SM part, pinned") {
  CHECK(fp8_quant_min_ctas(132) == 40);  // ceil(39.6)
  CHECK(fp8_quant_min_ctas(133) == 40);  // ceil(39.9)
  CHECK(fp8_quant_min_ctas(140) == 42);  // exactly 42
  struct Row { std::uint32_t k, min_m; };
  for (const Row row : {Row{5120, 16}, Row{6144, 14}, Row{7168, 12}, Row{17408, 5}}) {
    CAPTURE(row.k);
    CHECK(fp8_quant_hopper_min_m(row.k, 132) == row.min_m);
    CHECK_FALSE(fp8_act_quant_hopper_reject(true, true, true, row.min_m, row.k, 132).has_value());
    CHECK(fp8_act_quant_hopper_reject(true, true, true, row.min_m - 1, row.k, 132) == Fp8HopperReject::too_few_ctas);
  }
  CHECK(fp8_quant_hopper_ctas(16, 5120) == 40);  // 16 * 40 / 16
  CHECK(fp8_quant_hopper_ctas(15, 5120) == 38);  // ceil(37.5)
  CHECK(fp8_quant_hopper_ctas(12, 7168) == 42);  // 12 * 56 / 16
  CHECK(fp8_quant_hopper_ctas(11, 7168) == 39);  // ceil(38.5)
  CHECK(fp8_quant_hopper_ctas(5, 17408) == 43);  // ceil(5 * 136 / 16)
}

TEST_CASE("the pick routes every floor point measured on the H200 to the faster arm") {
  // One H200 run of kiln-bench's floor table (the flat twin; two more runs agree with the same
  // floor: docs/performance.md, "The CTA floor"): shared and twin us per launch, 132 SMs. A tie
  // (within 3%) may go either way.
  struct Point { std::uint32_t m, k; double shared_us, twin_us; };
  const Point points[] = {
      {16, 5120, 2.97, 2.99},  {17, 5120, 3.02, 3.01},  {25, 5120, 3.19, 3.06},  {53, 5120, 3.93, 3.27},
      {64, 5120, 4.21, 3.31},  {132, 5120, 6.06, 3.63}, {16, 6144, 3.04, 3.03},  {17, 6144, 3.04, 3.04},
      {25, 6144, 3.27, 3.09},  {53, 6144, 4.19, 3.31},  {64, 6144, 4.60, 3.39},  {132, 6144, 6.70, 3.74},
      {16, 7168, 3.12, 3.08},  {17, 7168, 3.16, 3.07},  {25, 7168, 3.47, 3.16},  {53, 7168, 4.44, 3.34},
      {64, 7168, 4.93, 3.38},  {132, 7168, 7.33, 3.92}, {16, 17408, 3.95, 3.27}, {17, 17408, 4.04, 3.30},
      {25, 17408, 4.79, 3.39}, {53, 17408, 7.20, 3.88}, {64, 17408, 8.17, 4.01}, {132, 17408, 13.90, 5.28},
  };
  const Fp8ActQuant quant(KernelHandle{1}, KernelHandle{2}, 132);
  for (const Point& p : points) {
    CAPTURE(p.m, p.k);
    const bool tie = std::abs(p.twin_us - p.shared_us) <= 0.03 * std::min(p.twin_us, p.shared_us);
    if (!tie) CHECK(quant.pick_with(true, p.m, p.k, 132).twin == (p.twin_us < p.shared_us));
  }
}

TEST_CASE("the floor follows sm_count; 0 counts as 1") {
  CHECK(fp8_quant_min_ctas(0) == 1);
  CHECK(fp8_quant_min_ctas(1) == 1);
  CHECK(fp8_quant_min_ctas(148) == 45);  // ceil(44.4)
  for (std::uint32_t k : {1024u, 2048u, 5120u, 6144u, 7168u, 17408u, 18432u}) {
    CAPTURE(k);
    CHECK(fp8_quant_hopper_min_m(k, 148) >= fp8_quant_hopper_min_m(k, 132));
    CHECK(fp8_quant_hopper_min_m(k, 0) == fp8_quant_hopper_min_m(k, 1));
    // The smallest M is exactly where the CTA count crosses the floor.
    for (std::uint32_t sm : {0u, 1u, 132u, 148u}) {
      const auto min_m = fp8_quant_hopper_min_m(k, sm);
      CHECK(fp8_quant_hopper_ctas(min_m, k) >= fp8_quant_min_ctas(sm));
      if (min_m > 0) CHECK(fp8_quant_hopper_ctas(min_m - 1, k) < fp8_quant_min_ctas(sm));
    }
  }
  // 148 SMs: 45 CTAs; K=5120 -> 2.5 CTAs per row -> 18 rows (17 give ceil(42.5) = 43).
  CHECK(fp8_quant_hopper_min_m(5120, 148) == 18);
  CHECK(fp8_quant_hopper_min_m(5120, 132) == 16);
}

namespace {

// Every non-negative integer in `text`, in order.
std::vector<std::uint64_t> numbers_in(const std::string& text) {
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
    if (text.find('.', i) >= end) out.push_back(std::stoull(text.substr(i, end - i)));
    i = end;
  }
  return out;
}

// The count before each occurrence of `unit` ("7 K-groups" -> 7).
std::vector<std::uint64_t> counts_before(const std::string& text, const std::string& unit) {
  std::vector<std::uint64_t> out;
  for (auto at = text.find(unit); at != std::string::npos; at = text.find(unit, at + 1)) {
    std::size_t start = at;
    while (start > 0 && text[start - 1] == ' ') --start;
    std::size_t digits = start;
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(text[digits - 1]))) --digits;
    REQUIRE(digits < start);  // every mention of the unit carries its count
    out.push_back(std::stoull(text.substr(digits, start - digits)));
  }
  return out;
}

}  // namespace

TEST_CASE("where the floor refuses the twin, the printed reason's numbers are the refused grid's") {
  std::size_t refused = 0;
  for (const std::uint32_t sm : {1u, 78u, 132u, 148u, 264u}) {
    const std::uint64_t floor = fp8_quant_min_ctas(sm);
    for (std::uint32_t groups = 1; groups <= 160; ++groups) {
      const std::uint32_t k = groups * FP8_QUANT_GROUP;
      for (std::uint32_t m = 1; m <= floor * 16; ++m) {
        if (fp8_act_quant_hopper_reject(true, true, true, m, k, sm) != Fp8HopperReject::too_few_ctas) continue;
        ++refused;
        const auto grid = fp8_quant_grid(true, m, k);
        const std::string text = fp8_quant_reject_text(Fp8HopperReject::too_few_ctas, m, k, sm);
        CAPTURE(sm, m, k, text);
        REQUIRE(text.rfind(std::string(to_string(Fp8HopperReject::too_few_ctas)), 0) == 0);
        const std::uint64_t ctas = std::uint64_t{grid[0]} * grid[1] * grid[2];
        CHECK(ctas < floor);
        const std::uint64_t total_groups = std::uint64_t{m} * groups;
        CHECK(counts_before(text, "K-groups") == std::vector<std::uint64_t>{total_groups});
        // In order: the grid, its CTAs, the groups and groups per CTA, the floor and its SMs.
        CHECK(numbers_in(text) ==
              std::vector<std::uint64_t>{grid[0], grid[1], grid[2], ctas, total_groups, 16, floor, sm});
      }
    }
  }
  CHECK(refused > 1000);
}

TEST_CASE("fp8_quant_hopper_min_m: every M from it on reaches the floor, the M before it does not") {
  std::vector<std::uint32_t> sms;
  for (std::uint32_t sm = 1; sm <= 264; ++sm) sms.push_back(sm);
  for (std::uint32_t sm : {6143u, 6144u, 6145u, 6146u, 6200u, 8000u, 8191u, 12288u, 65535u, 100000u}) sms.push_back(sm);
  for (const std::uint32_t k : {128u, 1024u, 2048u, 2176u, 5120u, 6144u, 7168u, 17408u, 18432u, 128u * 65535}) {
    for (const std::uint32_t sm : sms) {
      const std::uint64_t floor = fp8_quant_min_ctas(sm);
      const std::uint32_t min_m = fp8_quant_hopper_min_m(k, sm);
      CAPTURE(k, sm, floor, min_m);
      REQUIRE(min_m >= 1);
      CHECK(fp8_quant_hopper_ctas(min_m - 1, k) < floor);
      std::uint64_t first_miss = 0;
      for (std::uint64_t m = min_m; m <= std::uint64_t{min_m} + 4096 && first_miss == 0; ++m)
        if (fp8_quant_hopper_ctas(static_cast<std::uint32_t>(m), k) < floor) first_miss = m;
      CHECK(first_miss == 0);
      const Fp8ActQuant both(KernelHandle{1}, KernelHandle{2}, sm);
      CHECK(both.pick_with(true, min_m, k, sm).twin);
      CHECK_FALSE(both.pick_with(true, min_m - 1, k, sm).twin);
    }
  }
  // The flat grid's count never falls as M grows (the row grid of 2026-12-03 fell from 6142 to 3072
  // CTAs at 3072 rows, which made the first M to reach a floor a wrong answer).
  for (std::uint32_t m = 1; m <= 10000; ++m) REQUIRE(fp8_quant_hopper_ctas(m, 7168) >= fp8_quant_hopper_ctas(m - 1, 7168));
  REQUIRE(fp8_quant_min_ctas(6146) == 1844);
  CHECK(fp8_quant_hopper_ctas(527, 7168) == 1845);  // ceil(527 * 3.5)
  CHECK(fp8_quant_hopper_ctas(526, 7168) == 1841);
  CHECK(fp8_quant_hopper_min_m(7168, 6146) == 527);
}

TEST_CASE("CTA counts never overflow at type limits") {
  CHECK(fp8_quant_hopper_ctas(0xFFFFFFFFu, 0xFFFFFF80u) == FP8_QUANT_MAX_GRID_X);  // capped, not wrapped
  CHECK(fp8_quant_hopper_ctas(1, 0xFFFFFF80u) == 2097152);                          // ceil(33554431 / 16)
  CHECK(fp8_quant_hopper_ctas(0, 5120) == 0);
  // K < 128 has no group, so no M reaches the floor.
  CHECK(fp8_quant_hopper_min_m(0, 132) == 0xFFFFFFFFu);
  // The largest floor (ceil(0.3 x (2^32 - 1)) = 1288490189 CTAs) stays under the capped grid.
  CHECK_FALSE(fp8_act_quant_hopper_reject(true, true, true, 0xFFFFFFFFu, 0xFFFFFF80u, 0xFFFFFFFFu).has_value());
  CHECK(fp8_act_quant_hopper_reject(true, true, true, 1, 0xFFFFFF80u, 0xFFFFFFFFu) == Fp8HopperReject::too_few_ctas);
}

TEST_CASE("reasons have stable, distinct texts") {
  CHECK(to_string(Fp8HopperReject::absent) == "kernel absent from this image (hopper family only)");
  CHECK(to_string(Fp8HopperReject::not_requested) == "not requested");
  // The numbers behind it come with the grid text (fp8_quant_reject_text), not in the stable text.
  CHECK(to_string(Fp8HopperReject::too_few_ctas) == "too few CTAs to fill the device");
  CHECK(to_string(Fp8HopperReject::misaligned) == "pointers not 16-byte aligned for the twin's uint4 loads and stores");
  std::set<std::string_view> texts;
  for (auto r : {Fp8HopperReject::absent, Fp8HopperReject::not_requested, Fp8HopperReject::too_few_ctas,
                 Fp8HopperReject::misaligned})
    CHECK(texts.insert(to_string(r)).second);
}

TEST_CASE("verdict slots: one per verdict, nothing when the lever is off") {
  CHECK(fp8_act_quant_verdict_slot(true, std::nullopt) == FP8_VERDICT_SLOT_TWIN);
  std::set<std::size_t> slots{FP8_VERDICT_SLOT_TWIN};
  for (auto r : {Fp8HopperReject::absent, Fp8HopperReject::too_few_ctas, Fp8HopperReject::misaligned,
                 Fp8HopperReject::not_requested}) {
    const auto slot = fp8_act_quant_verdict_slot(true, r);
    REQUIRE(slot.has_value());
    CHECK(*slot < FP8_VERDICT_SLOT_COUNT);
    CHECK(slots.insert(*slot).second);
  }
  CHECK_FALSE(fp8_act_quant_verdict_slot(false, std::nullopt).has_value());
  CHECK_FALSE(fp8_act_quant_verdict_slot(false, Fp8HopperReject::not_requested).has_value());
  CHECK_FALSE(fp8_act_quant_verdict_slot(false, Fp8HopperReject::absent).has_value());
  // Small M then large M: different slots, so both verdicts get their line.
  const Fp8ActQuant both(KernelHandle{1}, KernelHandle{2}, 132);
  const auto small = both.pick_with(true, 1, 5120, 132);
  const auto large = both.pick_with(true, 4096, 5120, 132);
  CHECK(fp8_act_quant_verdict_slot(true, small.reject) != fp8_act_quant_verdict_slot(true, large.reject));
}

#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "base/log.hpp"

TEST_CASE("pick logs each verdict once per process: small M then large M prints both lines") {
  REQUIRE(fp8_act_quant_hopper_enabled());  // the suite runs with the lever at its default
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto& log = logger();
  log.sinks().push_back(sink);
  const auto old_level = log.level();
  log.set_level(spdlog::level::info);

  const Fp8ActQuant both(KernelHandle{1}, KernelHandle{2}, 132);
  for (int repeat = 0; repeat < 3; ++repeat) {
    both.pick(1, 5120);     // refused: too few CTAs
    both.pick(4096, 5120);  // twin runs
  }
  log.flush();
  log.set_level(old_level);
  log.sinks().pop_back();

  const std::string text = captured.str();
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  };
  CHECK(count("Hopper twin runs") == 1);
  CHECK(count(std::string(to_string(Fp8HopperReject::too_few_ctas))) == 1);
  CHECK(count("fp8_act_quant") == 2);
}

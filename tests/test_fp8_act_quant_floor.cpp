#include <catch2/catch.hpp>

#include <cstdlib>
#include <set>

#include "kiln/ops/fp8_act_quant.hpp"

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
  CHECK(fp8_act_quant_hopper_reject(true, true, true, 52, 5120, 132) == Fp8HopperReject::too_few_ctas);
  // 5. otherwise the twin runs.
  CHECK_FALSE(fp8_act_quant_hopper_reject(true, true, true, 53, 5120, 132).has_value());
}

TEST_CASE("without a shared kernel the twin runs at every M, whatever the lever") {
  const Fp8ActQuant twin_only(KernelHandle{}, KernelHandle{5}, 132);
  for (bool requested : {true, false})
    for (std::uint32_t m : {0u, 1u, 2u, 16u, 52u, 53u, 100000u}) {
      const auto chosen = twin_only.pick_with(requested, m, 5120, 132);
      CHECK(chosen.twin);
      CHECK(chosen.kernel == KernelHandle{5});
    }
}

TEST_CASE("floor thresholds on a 132-SM part, pinned") {
  CHECK(fp8_quant_min_ctas(132) == 264);
  struct Row { std::uint32_t k, min_m; };
  for (const Row row : {Row{5120, 53}, Row{6144, 44}, Row{17408, 16}}) {
    CAPTURE(row.k);
    CHECK(fp8_quant_hopper_min_m(row.k, 132) == row.min_m);
    CHECK_FALSE(fp8_act_quant_hopper_reject(true, true, true, row.min_m, row.k, 132).has_value());
    CHECK(fp8_act_quant_hopper_reject(true, true, true, row.min_m - 1, row.k, 132) == Fp8HopperReject::too_few_ctas);
  }
  CHECK(fp8_quant_hopper_ctas(53, 5120) == 265);
  CHECK(fp8_quant_hopper_ctas(44, 6144) == 264);
}

TEST_CASE("the floor follows sm_count; 0 counts as 1") {
  CHECK(fp8_quant_min_ctas(0) == 2);
  CHECK(fp8_quant_min_ctas(1) == 2);
  CHECK(fp8_quant_min_ctas(148) == 296);
  for (std::uint32_t k : {1024u, 2048u, 5120u, 6144u, 7168u, 17408u, 18432u}) {
    CAPTURE(k);
    CHECK(fp8_quant_hopper_min_m(k, 148) > fp8_quant_hopper_min_m(k, 132));
    CHECK(fp8_quant_hopper_min_m(k, 0) == fp8_quant_hopper_min_m(k, 1));
    // The smallest M is exactly where the CTA count crosses the floor.
    for (std::uint32_t sm : {0u, 1u, 132u, 148u}) {
      const auto min_m = fp8_quant_hopper_min_m(k, sm);
      CHECK(fp8_quant_hopper_ctas(min_m, k) >= fp8_quant_min_ctas(sm));
      if (min_m > 0) CHECK(fp8_quant_hopper_ctas(min_m - 1, k) < fp8_quant_min_ctas(sm));
    }
  }
  // 148 SMs: 296 CTAs; K=5120 -> 5 CTAs per row -> 60 rows.
  CHECK(fp8_quant_hopper_min_m(5120, 148) == 60);
}

TEST_CASE("CTA counts never overflow at type limits") {
  CHECK(fp8_quant_hopper_ctas(0xFFFFFFFFu, 0xFFFFFF80u) == 0xFFFFFFFFull * 65535);
  CHECK(fp8_quant_hopper_ctas(0, 5120) == 0);
  CHECK(fp8_quant_hopper_min_m(0, 132) == 264);  // K < 128 still has one twin CTA per row
  CHECK_FALSE(fp8_act_quant_hopper_reject(true, true, true, 0xFFFFFFFFu, 0xFFFFFF80u, 0xFFFFFFFFu).has_value());
}

TEST_CASE("reasons have stable, distinct texts") {
  CHECK(to_string(Fp8HopperReject::absent) == "kernel absent from this image (hopper family only)");
  CHECK(to_string(Fp8HopperReject::not_requested) == "not requested");
  CHECK(to_string(Fp8HopperReject::too_few_ctas) == "too few CTAs to fill the device at 8 K-groups per CTA");
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

#include "kiln/log.hpp"

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

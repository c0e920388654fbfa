// The FP8 quantizer on a real GPU: every byte of q and every scale, both arms, against the CPU
// reference (src/ops/fp8_reference.hpp), on fresh random inputs each run, with
// outputs poisoned before each launch so an unwritten byte fails.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <deque>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "device_buffer.hpp"
#include "ops/fp8_act_quant_floor.hpp"
#include "runtime/cuda_backend.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "ops/fp8_reference.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"

using namespace kiln;
using namespace kiln::ops;

namespace {

struct Gpu {
  InternalService service{0};
  driver::PrimaryContext context{driver::driver_api(), 0};
  Fp8ActQuant quant = service.fp8_act_quant();
};

Gpu& gpu() {
  static Gpu instance;
  return instance;
}

std::uint64_t run_seed() {
  static const std::uint64_t seed = std::random_device{}();
  return seed;
}

// Random bf16 with magnitudes spread over many binades, so groups have varied scales.
std::vector<std::uint16_t> random_input(std::uint32_t m, std::uint32_t k, std::uint64_t salt) {
  std::vector<std::uint16_t> x(static_cast<std::size_t>(m) * k);
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(run_seed() ^ (salt * 0x9E3779B97F4A7C15ull) ^ t);
      std::normal_distribution<float> normal(0.f, 1.f);
      std::uniform_int_distribution<int> exponent(-20, 20);
      const std::size_t rows_per = (m + threads - 1) / threads;
      for (std::size_t r = t * rows_per; r < std::min<std::size_t>(m, (t + 1) * rows_per); ++r) {
        for (std::uint32_t g = 0; g < k / 128; ++g) {
          const float group_scale = std::ldexp(1.f, exponent(rng));
          for (std::uint32_t e = 0; e < 128; ++e)
            x[r * k + g * 128 + e] = float_to_bf16(normal(rng) * group_scale);
        }
      }
    });
  for (auto& th : pool) th.join();
  return x;
}

void reference(const std::vector<std::uint16_t>& x, std::uint32_t m, std::uint32_t k, std::vector<std::uint8_t>& q,
               std::vector<float>& s) {
  q.assign(static_cast<std::size_t>(m) * k, 0);
  s.assign(static_cast<std::size_t>(m) * (k / 128), 0.f);
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  const std::uint32_t rows_per = (m + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const std::uint32_t r0 = std::min(m, t * rows_per), r1 = std::min(m, (t + 1) * rows_per);
      if (r1 > r0)
        fp8_quantize_reference(x.data() + std::size_t{r0} * k, r1 - r0, k, q.data() + std::size_t{r0} * k,
                               s.data() + std::size_t{r0} * (k / 128));
    });
  for (auto& th : pool) th.join();
}

struct DeviceOutputs {
  std::vector<std::uint8_t> q;
  std::vector<float> s;
};

DeviceOutputs download(const test::DeviceBuffer& dq, const test::DeviceBuffer& ds, std::uint32_t m, std::uint32_t k) {
  DeviceOutputs out;
  out.q.resize(std::size_t{m} * k);
  out.s.resize(std::size_t{m} * (k / 128));
  dq.download(out.q.data(), out.q.size());
  ds.download(out.s.data(), out.s.size() * 4);
  return out;
}

// Launch one arm directly with `grid_y` (0: the pick core's grid for that arm).
// `twin_grid_x`: the twin on a grid of that many CTAs instead of kiln's (a smaller one stands in
// for a capped grid, whose slots loop); 0 for kiln's grid.
DeviceOutputs run_arm(const std::vector<std::uint16_t>& x, std::uint32_t m, std::uint32_t k, bool twin,
                      std::uint32_t twin_grid_x = 0) {
  auto& g = gpu();
  const std::size_t n = static_cast<std::size_t>(m) * k;
  test::DeviceBuffer dx(g.context, n * 2), dq(g.context, n), ds(g.context, std::size_t{m} * (k / 128) * 4);
  dx.upload(x.data(), n * 2);
  dq.fill(0xCD);  // poison: 0xCD is a valid e4m3 code, so only a byte the kernel wrote can match
  ds.fill(0xFF);  // poison: NaN scales
  auto grid = fp8_quant_grid(twin, m, k);
  if (twin && twin_grid_x != 0) grid[0] = twin_grid_x;
  const void* px = dx.get();
  void* pq = dq.get();
  void* ps = ds.get();
  std::uint32_t k_arg = k;
  std::uint32_t m_arg = m;  // the twin's fifth argument; the shared kernel declares four
  void* args[] = {&px, &pq, &ps, &k_arg, &m_arg};
  g.service.backend().launch(twin ? g.quant.hopper() : g.quant.shared(), Dim3{grid[0], grid[1], grid[2]},
                             Dim3{128, 1, 1}, 0, nullptr, args);
  test::synchronize(g.context);
  return download(dq, ds, m, k);
}

void check_equal(const std::vector<std::uint8_t>& q, const std::vector<float>& s, const DeviceOutputs& got,
                 std::uint32_t m, std::uint32_t k) {
  const auto mismatch = compare_fp8_outputs(q.data(), s.data(), got.q.data(), got.s.data(), m, k);
  if (mismatch) FAIL(to_string(*mismatch));
}

void check_both_arms(const std::vector<std::uint16_t>& x, std::uint32_t m, std::uint32_t k) {
  std::vector<std::uint8_t> q;
  std::vector<float> s;
  reference(x, m, k, q, s);
  const auto shared = run_arm(x, m, k, false);
  check_equal(q, s, shared, m, k);
  const auto twin = run_arm(x, m, k, true);
  check_equal(q, s, twin, m, k);
  // The twin equals the shared kernel byte for byte (implied above, stated for the report).
  CHECK(std::memcmp(shared.q.data(), twin.q.data(), shared.q.size()) == 0);
  CHECK(std::memcmp(shared.s.data(), twin.s.data(), shared.s.size() * 4) == 0);
}

}  // namespace

TEST_CASE("the H200 gets sm_90a and both quantizer kernels") {
  auto& g = gpu();
  INFO("device " << g.service.backend().device().name << ", seed " << run_seed());
  REQUIRE(g.service.backend().target().has_value());
  const auto& device = g.service.backend().device();
  if (device.cc.major == 9 && device.cc.minor == 0) {
    CHECK(g.service.backend().target()->name() == "sm_90a");
    CHECK(g.quant.twin_present());
  }
  CHECK(g.quant.shared().loaded());
  CHECK(g.service.backend().try_target_kernel(FP8_QUANT_HOPPER_MODULE, FP8_QUANT_HOPPER_ENTRY) == g.quant.hopper());
}

TEST_CASE("both arms match the CPU reference at decode and prefill shapes") {
  REQUIRE(gpu().quant.twin_present());
  std::uint64_t salt = 1;
  for (std::uint32_t m : {1u, 2u, 7u, 16u, 17u, 25u, 1168u, 4576u, 8192u})
    for (std::uint32_t k : {128u, 1024u, 2048u, 5120u, 6144u, 7168u, 16384u, 17408u, 18432u}) {
      CAPTURE(m, k, run_seed());
      check_both_arms(random_input(m, k, salt++), m, k);
    }
}

TEST_CASE("special values: zeros, denormals, huge values, zero groups, single non-zero, NaN, inf") {
  const std::uint32_t m = 8, k = 1024;
  auto x = random_input(m, k, 999);
  auto set = [&](std::uint32_t row, std::uint32_t col, float v) { x[std::size_t{row} * k + col] = float_to_bf16(v); };
  for (std::uint32_t e = 0; e < 128; ++e) set(0, e, 0.f);                     // whole zero group
  for (std::uint32_t e = 0; e < 128; ++e) set(0, 128 + e, e == 77 ? 3.5f : 0.f);  // single non-zero
  for (std::uint32_t e = 0; e < 128; ++e) set(1, e, std::ldexp(1.f, -130) * (e % 7));  // bf16 denormals
  for (std::uint32_t e = 0; e < 128; ++e) set(1, 128 + e, (e % 2 ? -3e38f : 3e38f) / (1 + e % 5));  // huge
  for (std::uint32_t e = 0; e < 128; ++e) set(2, e, e == 5 ? NAN : 1.f + e);  // a NaN element
  for (std::uint32_t e = 0; e < 128; ++e) set(2, 128 + e, e == 9 ? INFINITY : 1.f + e);  // an inf element
  for (std::uint32_t e = 0; e < 128; ++e) set(3, e, e == 0 ? -INFINITY : (e == 1 ? NAN : -2.f));
  for (std::uint32_t e = 0; e < 128; ++e) set(3, 128 + e, e % 2 ? -0.f : 0.f);  // signed zeros
  for (std::uint32_t e = 0; e < 128; ++e) set(4, e, std::ldexp(1.f, -126) * (1 + e));  // tiny normals (< eps)
  check_both_arms(x, m, k);
}

TEST_CASE("the twin covers every group on any grid X up to kiln's (smaller grids loop, as a capped one)") {
  const std::uint32_t m = 3, k = 128 * 37;  // 111 groups: 7 CTAs, the last with 15 of 16 slots busy
  const auto x = random_input(m, k, 4242);
  std::vector<std::uint8_t> q;
  std::vector<float> s;
  reference(x, m, k, q, s);
  REQUIRE(fp8_quant_grid(true, m, k)[0] == 7);
  for (std::uint32_t grid_x : {1u, 2u, 3u, 4u, 5u, 6u, 7u}) {
    CAPTURE(grid_x);
    check_equal(q, s, run_arm(x, m, k, true, grid_x), m, k);
  }
}

TEST_CASE("past the shared kernel's grid-Y limit (L = 65535) the twin covers every group") {
  const std::uint32_t k = 128 * (8 * 65535 + 8), m = 1;  // 524288 groups: 32768 CTAs
  REQUIRE(fp8_quant_grid(true, m, k)[0] == 32768);
  const auto x = random_input(m, k, 77);
  std::vector<std::uint8_t> q;
  std::vector<float> s;
  reference(x, m, k, q, s);
  check_equal(q, s, run_arm(x, m, k, true), m, k);
  check_equal(q, s, run_arm(x, m, k, true, 1000), m, k);
}

TEST_CASE("every (absmax, x) pair of bf16 values: the twin's division gives the shared kernel's bytes", "[all-pairs]") {
  // Row a's groups all have absmax a (element 0); their other 127 slots walk every bf16 of
  // magnitude <= a, both signs, so the rows hold all ~2^31 pairs a group can contain (4.3 GB).
  constexpr std::uint32_t m = 0x7f80;  // finite absmax bit patterns 0x0000..0x7f7f
  constexpr std::uint32_t groups = (2 * m + 126) / 127;
  constexpr std::uint32_t k = groups * 128;
  std::vector<std::uint16_t> x(std::size_t{m} * k, 0);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < 16; ++t)
    pool.emplace_back([&, t] {
      for (std::uint32_t a = t; a < m; a += 16) {
        std::uint16_t* row = x.data() + std::size_t{a} * k;
        for (std::uint32_t g = 0; g < groups; ++g) row[g * 128] = static_cast<std::uint16_t>(a);
        for (std::uint32_t i = 0; i < 2 * (a + 1); ++i)
          row[(i / 127) * 128 + 1 + i % 127] = static_cast<std::uint16_t>((i % 2 ? 0x8000u : 0u) | (i / 2));
      }
    });
  for (auto& th : pool) th.join();
  const auto shared = run_arm(x, m, k, false);
  const auto twin = run_arm(x, m, k, true);
  const auto mismatch = compare_fp8_outputs(shared.q.data(), shared.s.data(), twin.q.data(), twin.s.data(), m, k);
  INFO((mismatch ? to_string(*mismatch) : std::string("no difference")));
  CHECK_FALSE(mismatch.has_value());
}

TEST_CASE("Fp8ActQuant::launch runs the picked kernel with its grid, on the caller's stream") {
  auto& g = gpu();
  for (std::uint32_t m : {1u, 53u, 4096u}) {
    const std::uint32_t k = 5120;
    CAPTURE(m);
    const auto x = random_input(m, k, 100 + m);
    std::vector<std::uint8_t> q;
    std::vector<float> s;
    reference(x, m, k, q, s);
    const std::size_t n = std::size_t{m} * k;
    test::DeviceBuffer dx(g.context, n * 2), dq(g.context, n), ds(g.context, std::size_t{m} * 40 * 4);
    dx.upload(x.data(), n * 2);
    dq.fill(0xCD);
    ds.fill(0xFF);
    const auto chosen = g.quant.launch(g.service.backend(), dx.get(), dq.get(), static_cast<float*>(ds.get()), m, k, nullptr);
    test::synchronize(g.context);
    CHECK(chosen.twin == (m >= fp8_quant_hopper_min_m(k, g.service.backend().device().sm_count) &&
                          fp8_act_quant_hopper_enabled()));
    check_equal(q, s, download(dq, ds, m, k), m, k);
  }
}

TEST_CASE("misaligned pointers run the shared kernel and still give the reference bytes") {
  auto& g = gpu();
  const std::uint32_t m = 4096, k = 1024;
  const auto x = random_input(m, k, 31337);
  std::vector<std::uint8_t> q;
  std::vector<float> s;
  reference(x, m, k, q, s);
  const std::size_t n = std::size_t{m} * k;
  // x offset by 2 bytes (still bf16-aligned), or q by 8 (enough for 8-byte stores, not the twin's 16).
  const std::pair<std::size_t, std::size_t> offsets[] = {{2, 0}, {0, 8}};
  for (const auto& [x_offset, q_offset] : offsets) {
    CAPTURE(x_offset, q_offset);
    test::DeviceBuffer dx(g.context, n * 2 + 16), dq(g.context, n + 16), ds(g.context, std::size_t{m} * 8 * 4);
    std::vector<std::uint8_t> staging(n * 2 + 16, 0);
    std::memcpy(staging.data() + x_offset, x.data(), n * 2);
    dx.upload(staging.data(), staging.size());
    dq.fill(0xCD);
    ds.fill(0xFF);
    auto* px = static_cast<std::uint8_t*>(dx.get()) + x_offset;
    auto* pq = static_cast<std::uint8_t*>(dq.get()) + q_offset;
    const auto chosen = g.quant.launch(g.service.backend(), px, pq, static_cast<float*>(ds.get()), m, k, nullptr);
    test::synchronize(g.context);
    if (fp8_act_quant_hopper_enabled()) CHECK(chosen.reject == Fp8HopperReject::misaligned);
    CHECK_FALSE(chosen.twin);
    std::vector<std::uint8_t> all_q(n + 16);
    dq.download(all_q.data(), all_q.size());
    DeviceOutputs got = download(dq, ds, m, k);
    got.q.assign(all_q.begin() + static_cast<std::ptrdiff_t>(q_offset), all_q.begin() + static_cast<std::ptrdiff_t>(q_offset + n));
    check_equal(q, s, got, m, k);
  }
}

TEST_CASE("PDL launches back to back keep the stream's order: each launch reads the one before's output") {
  auto& g = gpu();
  CHECK(g.service.backend().launches_dependent(LaunchOptions{true}));  // an H200 with driver 580: PDL is in effect
  // A chain whose every step reads its input from the previous step's q, reinterpreted as bf16
  // [m, k/2]: a step that ran before its predecessor finished would read poison or old bytes.
  // Repeated, so each step also overwrites what the next step of the previous round read.
  constexpr int STEPS = 5;
  constexpr int ROUNDS = 8;
  for (std::uint32_t m : {16u, 4096u}) {
    CAPTURE(m);
    const std::uint32_t k0 = 128u << STEPS;
    const auto x = random_input(m, k0, 4242 + m);
    std::vector<std::vector<std::uint8_t>> want_q(STEPS);
    std::vector<std::vector<float>> want_s(STEPS);
    std::vector<std::uint16_t> input = x;
    for (int step = 0; step < STEPS; ++step) {
      const std::uint32_t k = k0 >> step;
      reference(input, m, k, want_q[step], want_s[step]);
      input.assign(std::size_t{m} * k / 2, 0);
      std::memcpy(input.data(), want_q[step].data(), want_q[step].size());
    }
    test::DeviceBuffer dx(g.context, std::size_t{m} * k0 * 2);
    dx.upload(x.data(), std::size_t{m} * k0 * 2);
    std::deque<test::DeviceBuffer> dq, ds;  // Why a deque: buffers cannot move
    for (int step = 0; step < STEPS; ++step) {
      const std::uint32_t k = k0 >> step;
      dq.emplace_back(g.context, std::size_t{m} * k);
      ds.emplace_back(g.context, std::size_t{m} * (k / 128) * 4);
      dq.back().fill(0xCD);
      ds.back().fill(0xFF);
    }
    bool twin_ran = false;
    for (int round = 0; round < ROUNDS; ++round)
      for (int step = 0; step < STEPS; ++step) {
        const void* in = step == 0 ? dx.get() : dq[step - 1].get();
        const auto chosen = g.quant.launch(g.service.backend(), in, dq[step].get(), static_cast<float*>(ds[step].get()),
                                           m, k0 >> step, nullptr, LaunchOptions{true});
        twin_ran = twin_ran || chosen.twin;
      }
    test::synchronize(g.context);
    if (m == 4096 && fp8_act_quant_hopper_enabled()) CHECK(twin_ran);
    for (int step = 0; step < STEPS; ++step) {
      CAPTURE(step);
      check_equal(want_q[step], want_s[step], download(dq[step], ds[step], m, k0 >> step), m, k0 >> step);
    }
  }
}

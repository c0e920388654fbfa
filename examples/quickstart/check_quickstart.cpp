// The README's C and C++ examples (quantize_fp8.c, quantize_fp8.cpp), run: without a GPU, their
// refusals of bad input; on a GPU, their bytes against the CPU reference. tests/docs/test_readme.py
// checks that the README shows these files as they are.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "ops/group_quant_reference.hpp"
#include "kiln/service.hpp"

extern "C" kiln_status quantize_fp8(kiln_service* service, const void* x, void* q, float* scales, uint64_t m,
                                    uint64_t k, void* stream);
void quantize_fp8(kiln::Service& service, const void* x, void* q, float* scales, std::uint64_t m, std::uint64_t k,
                  void* stream);

namespace {

struct CService {
  kiln_service* service = nullptr;
  CService() { REQUIRE(kiln_service_create(0, &service) == KILN_OK); }
  ~CService() { kiln_service_destroy(service); }
};

}  // namespace

TEST_CASE("the README's examples refuse bad input and take an empty tensor", "[cpu]") {
  CService c;
  CHECK(quantize_fp8(c.service, nullptr, nullptr, nullptr, 4, 128, nullptr) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_last_error()).find("'x'") != std::string::npos);
  CHECK(quantize_fp8(c.service, nullptr, nullptr, nullptr, 0, 0, nullptr) == KILN_OK);

  kiln::Service service(0);
  try {
    quantize_fp8(service, nullptr, nullptr, nullptr, 4, 128, nullptr);
    FAIL("a null x is refused");
  } catch (const kiln::Error& error) {
    CHECK(std::string(error.what()).find("'x'") != std::string::npos);
  }
  quantize_fp8(service, nullptr, nullptr, nullptr, 0, 0, nullptr);
}

TEST_CASE("the README's examples write the CPU reference's bytes", "[gpu]") {
  constexpr std::uint64_t m = 77, k = 7168;
  std::vector<std::uint16_t> x(m * k);
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (auto& element : x) {
    const float value = normal(random);
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    element = static_cast<std::uint16_t>(bits >> 16);  // bf16 by truncation: any bf16 will do
  }
  const kiln::ops::QuantVariant variant;
  std::vector<std::uint8_t> q_ref(m * k);
  std::vector<float> scales_ref(m * k / 128);
  kiln::ops::group_quant_reference(variant, x.data(), m, k, 0, 1e-10f, q_ref.data(), scales_ref.data());

  kiln::Service service(0);
  REQUIRE(service.available());
  CService c;
  const kiln::driver::PrimaryContext context{kiln::driver::driver_api(), 0};
  for (const bool from_c : {true, false}) {
    kiln::test::DeviceBuffer dx(context, x.size() * 2), dq(context, m * k), ds(context, scales_ref.size() * 4);
    dx.upload(x.data(), x.size() * 2);
    dq.fill(0xCD);
    ds.fill(0xCD);
    auto* scales = static_cast<float*>(ds.get());
    if (from_c)
      REQUIRE(quantize_fp8(c.service, dx.get(), dq.get(), scales, m, k, nullptr) == KILN_OK);
    else
      quantize_fp8(service, dx.get(), dq.get(), scales, m, k, nullptr);
    kiln::test::synchronize(context);
    std::vector<std::uint8_t> q(m * k);
    std::vector<float> s(scales_ref.size());
    dq.download(q.data(), q.size());
    ds.download(s.data(), s.size() * 4);
    INFO((from_c ? "C" : "C++") << " example");
    CHECK(q == q_ref);
    CHECK(std::memcmp(s.data(), scales_ref.data(), s.size() * 4) == 0);
  }
}

// The C ABI (kiln.h) from C++, without a GPU: statuses and last errors for bad arguments, struct
// layouts and sizes, per-thread errors, and the pick and plan against Fp8ActQuant::pick_with.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "cache/disk/disk_cache.hpp"
#include "ops/fp8_act_quant_floor.hpp"
#include "runtime/module_provider.hpp"
#include "runtime/cuda_backend.hpp"
#include "error_of.hpp"
#include "kiln/kiln.h"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"
#include "kiln/version.hpp"

using namespace kiln;
using namespace kiln::ops;
using kiln::test::error_of;

namespace {

struct ServiceDeleter {
  void operator()(kiln_service* service) const { kiln_service_destroy(service); }
};
using ServicePtr = std::unique_ptr<kiln_service, ServiceDeleter>;

ServicePtr make_service() {
  kiln_service* raw = nullptr;
  REQUIRE(kiln_service_create(0, &raw) == KILN_OK);
  REQUIRE(raw != nullptr);
  return ServicePtr(raw);
}

template <class Struct>
Struct sized() {
  Struct value;
  std::memset(&value, 0, sizeof value);
  value.struct_size = sizeof value;
  return value;
}

std::string last_error() { return kiln_last_error(); }

// The call failed with `status` and a last error naming `word`.
#define CHECK_FAILS(call, status, word)                  \
  do {                                                   \
    CHECK((call) == (status));                           \
    CHECK_THAT(last_error(), Catch::Contains(word));     \
  } while (false)

bool gpu_here() {
  const DriverStatus status = driver_status();
  return status.available && !status.devices.empty();
}

std::int32_t expected_reject(const Fp8QuantPick& chosen) {
  if (!chosen.reject) return KILN_FP8_REJECT_NONE;
  switch (*chosen.reject) {
    case Fp8HopperReject::absent: return KILN_FP8_REJECT_ABSENT;
    case Fp8HopperReject::not_requested: return KILN_FP8_REJECT_NOT_REQUESTED;
    case Fp8HopperReject::too_few_ctas: return KILN_FP8_REJECT_TOO_FEW_CTAS;
    case Fp8HopperReject::misaligned: return KILN_FP8_REJECT_MISALIGNED;
  }
  return -1;
}

// Everything but the handle, which only the service that made it knows.
void check_same_pick(const kiln_fp8_pick& c, const Fp8QuantPick& cpp) {
  REQUIRE_FALSE(cpp.refused());  // the C calls refuse with a status instead
  CHECK(c.noop == (cpp.action == Fp8QuantAction::noop ? 1 : 0));
  CHECK(c.reserved == 0);
  CHECK(c.twin == (cpp.twin ? 1 : 0));
  CHECK(c.grid[0] == cpp.grid[0]);
  CHECK(c.grid[1] == cpp.grid[1]);
  CHECK(c.grid[2] == cpp.grid[2]);
  CHECK(c.block[0] == 128);
  CHECK(c.block[1] == 1);
  CHECK(c.block[2] == 1);
  CHECK(c.reject == expected_reject(cpp));
  CHECK(c.requested == (cpp.requested ? 1 : 0));
  CHECK(std::string(c.entry) == (!cpp.launches() ? std::string()
                                 : std::string(cpp.twin ? FP8_QUANT_HOPPER_ENTRY : FP8_QUANT_ENTRY)));
  CHECK(std::string(c.reason) == (cpp.reject ? std::string(to_string(*cpp.reject)) : std::string()));
}

}  // namespace

TEST_CASE("C ABI: version, ABI version and status names") {
  std::uint32_t major = 99, minor = 99, patch = 99;
  REQUIRE(kiln_version(&major, &minor, &patch) == KILN_OK);
  CHECK(last_error().empty());
  CHECK(std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) == version_string());
  std::uint32_t abi = 0;
  REQUIRE(kiln_abi_version(&abi) == KILN_OK);
  CHECK(abi == KILN_ABI_VERSION);

  CHECK_FAILS(kiln_version(nullptr, &minor, &patch), KILN_ERROR_INVALID_ARGUMENT, "'major'");
  CHECK_FAILS(kiln_version(&major, nullptr, &patch), KILN_ERROR_INVALID_ARGUMENT, "'minor'");
  CHECK_FAILS(kiln_version(&major, &minor, nullptr), KILN_ERROR_INVALID_ARGUMENT, "'patch'");
  CHECK_FAILS(kiln_abi_version(nullptr), KILN_ERROR_INVALID_ARGUMENT, "'abi'");

  CHECK(std::string(kiln_status_string(KILN_OK)) == "ok");
  CHECK(std::string(kiln_status_string(KILN_ERROR_INVALID_ARGUMENT)) == "invalid argument");
  CHECK(std::string(kiln_status_string(KILN_ERROR_UNAVAILABLE)) == "unavailable");
  CHECK(std::string(kiln_status_string(KILN_ERROR_DRIVER)) == "CUDA driver error");
  CHECK(std::string(kiln_status_string(KILN_ERROR_COMPILE)) == "NVRTC compile error");
  CHECK(std::string(kiln_status_string(KILN_ERROR_OUT_OF_MEMORY)) == "out of host memory");
  CHECK(std::string(kiln_status_string(KILN_ERROR_INTERNAL)) == "internal error");
  CHECK(std::string(kiln_status_string(7)) == "unknown status");
  CHECK(std::string(kiln_status_string(-1)) == "unknown status");
}

TEST_CASE("C ABI: struct layouts are the v1 layouts the Rust and Python examples mirror, grown only at the end") {
  CHECK(sizeof(kiln_device_info) == KILN_DEVICE_INFO_V1_SIZE);
  CHECK(KILN_DEVICE_INFO_V1_SIZE == 568);
  CHECK(offsetof(kiln_device_info, struct_size) == 0);
  CHECK(offsetof(kiln_device_info, ordinal) == 4);
  CHECK(offsetof(kiln_device_info, cc_major) == 8);
  CHECK(offsetof(kiln_device_info, cc_minor) == 12);
  CHECK(offsetof(kiln_device_info, sm_count) == 16);
  CHECK(offsetof(kiln_device_info, available) == 20);
  CHECK(offsetof(kiln_device_info, name) == 24);
  CHECK(offsetof(kiln_device_info, target) == 280);
  CHECK(offsetof(kiln_device_info, reason) == 312);

  // v2 appends `noop` and `reserved`; a v1 caller (240 bytes) keeps every offset below.
  CHECK(sizeof(kiln_fp8_pick) == KILN_FP8_PICK_V2_SIZE);
  CHECK(KILN_FP8_PICK_V1_SIZE == 240);
  CHECK(KILN_FP8_PICK_V2_SIZE == 248);
  CHECK(offsetof(kiln_fp8_pick, noop) == 240);
  CHECK(offsetof(kiln_fp8_pick, reserved) == 244);
  CHECK(offsetof(kiln_fp8_pick, twin) == 4);
  CHECK(offsetof(kiln_fp8_pick, kernel) == 8);
  CHECK(offsetof(kiln_fp8_pick, grid) == 16);
  CHECK(offsetof(kiln_fp8_pick, block) == 28);
  CHECK(offsetof(kiln_fp8_pick, reject) == 40);
  CHECK(offsetof(kiln_fp8_pick, requested) == 44);
  CHECK(offsetof(kiln_fp8_pick, entry) == 48);
  CHECK(offsetof(kiln_fp8_pick, reason) == 112);

  CHECK(sizeof(kiln_cache_stats) == KILN_CACHE_STATS_V2_SIZE);
  CHECK(KILN_CACHE_STATS_V1_SIZE == 144);
  CHECK(offsetof(kiln_cache_stats, disk_mode) == 4);
  CHECK(offsetof(kiln_cache_stats, memory_hits) == 8);
  CHECK(offsetof(kiln_cache_stats, compile_ms) == 56);
  CHECK(offsetof(kiln_cache_stats, disk_hits) == 64);
  CHECK(offsetof(kiln_cache_stats, store_failures) == 136);
}

TEST_CASE("C ABI: services are created and destroyed; bad arguments are refused") {
  CHECK_FAILS(kiln_service_create(0, nullptr), KILN_ERROR_INVALID_ARGUMENT, "'out'");
  kiln_service* raw = reinterpret_cast<kiln_service*>(0x1);
  CHECK_FAILS(kiln_service_create(-1, &raw), KILN_ERROR_INVALID_ARGUMENT, "'ordinal'");
  CHECK(raw == nullptr);
  CHECK(kiln_service_destroy(nullptr) == KILN_OK);
  CHECK(last_error().empty());

  const ServicePtr service = make_service();
  CHECK(last_error().empty());
  if (gpu_here()) {
    raw = reinterpret_cast<kiln_service*>(0x1);
    CHECK_FAILS(kiln_service_create(static_cast<std::int32_t>(driver_status().devices.size()), &raw),
                KILN_ERROR_INVALID_ARGUMENT, "'ordinal'");
    CHECK(raw == nullptr);
  }
}

TEST_CASE("C ABI: device info matches the C++ service; struct sizes are honoured") {
  const ServicePtr service = make_service();
  InternalService cpp(0);
  const CudaBackend& backend = cpp.backend();

  kiln_device_info info = sized<kiln_device_info>();
  REQUIRE(kiln_service_device_info(service.get(), &info) == KILN_OK);
  CHECK(info.struct_size == sizeof info);
  CHECK(info.ordinal == 0);
  CHECK(info.available == (backend.available() ? 1 : 0));
  CHECK(info.cc_major == backend.device().cc.major);
  CHECK(info.cc_minor == backend.device().cc.minor);
  CHECK(info.sm_count == backend.device().sm_count);
  CHECK(std::string(info.name) == backend.device().name.substr(0, sizeof info.name - 1));
  CHECK(std::string(info.target) == (backend.target() ? backend.target()->name() : std::string()));
  CHECK(std::string(info.reason) == backend.unavailable_reason().substr(0, sizeof info.reason - 1));
  if (!gpu_here()) {
    CHECK(info.available == 0);
    CHECK(std::string(info.reason).size() > 0);
  }

  CHECK_FAILS(kiln_service_device_info(nullptr, &info), KILN_ERROR_INVALID_ARGUMENT, "'service'");
  CHECK_FAILS(kiln_service_device_info(service.get(), nullptr), KILN_ERROR_INVALID_ARGUMENT, "'out'");
  kiln_device_info small = sized<kiln_device_info>();
  small.struct_size = KILN_DEVICE_INFO_V1_SIZE - 1;
  small.ordinal = 42;
  CHECK_FAILS(kiln_service_device_info(service.get(), &small), KILN_ERROR_INVALID_ARGUMENT, "out->struct_size");
  CHECK(small.ordinal == 42);  // nothing written

  // A caller from a later version: kiln fills its v1 part and leaves the rest alone.
  struct Grown {
    kiln_device_info v1;
    std::uint64_t later;
  } grown;
  std::memset(&grown, 0, sizeof grown);
  grown.v1.struct_size = sizeof grown;
  grown.v1.ordinal = 42;
  grown.later = 0x5A5A5A5A5A5A5A5Aull;
  REQUIRE(kiln_service_device_info(service.get(), &grown.v1) == KILN_OK);
  CHECK(grown.v1.struct_size == sizeof grown);
  CHECK(grown.v1.ordinal == 0);
  CHECK(grown.later == 0x5A5A5A5A5A5A5A5Aull);
}

TEST_CASE("C ABI: kernel handles, and 0 for what is not there") {
  const ServicePtr service = make_service();
  std::uint64_t handle = 77;
  REQUIRE(kiln_try_kernel(service.get(), "no_such_module", "nothing", &handle) == KILN_OK);
  CHECK(handle == 0);
  CHECK(last_error().empty());
  handle = 77;
  REQUIRE(kiln_try_target_kernel(service.get(), "per_token_group_quant_fp8", "no_such_entry", &handle) == KILN_OK);
  CHECK(handle == 0);

  InternalService cpp(0);
  handle = 77;
  REQUIRE(kiln_try_kernel(service.get(), "per_token_group_quant_fp8", "per_token_group_quant_fp8", &handle) == KILN_OK);
  CHECK((handle != 0) == cpp.backend().try_kernel(FP8_QUANT_MODULE, FP8_QUANT_ENTRY).loaded());
  handle = 77;
  REQUIRE(kiln_try_target_kernel(service.get(), "fp8_act_quant_hopper", "per_token_group_quant_fp8_hopper", &handle) ==
          KILN_OK);
  CHECK((handle != 0) ==
        cpp.backend().try_target_kernel(FP8_QUANT_HOPPER_MODULE, FP8_QUANT_HOPPER_ENTRY).loaded());

  for (auto* function : {&kiln_try_kernel, &kiln_try_target_kernel}) {
    handle = 77;
    CHECK_FAILS(function(nullptr, "m", "e", &handle), KILN_ERROR_INVALID_ARGUMENT, "'service'");
    CHECK(handle == 0);
    handle = 77;
    CHECK_FAILS(function(service.get(), nullptr, "e", &handle), KILN_ERROR_INVALID_ARGUMENT, "'module'");
    CHECK(handle == 0);
    CHECK_FAILS(function(service.get(), "m", nullptr, &handle), KILN_ERROR_INVALID_ARGUMENT, "'entry'");
    CHECK_FAILS(function(service.get(), "m", "e", nullptr), KILN_ERROR_INVALID_ARGUMENT, "'handle'");
  }
}

TEST_CASE("C ABI: the service's pick is Fp8ActQuant::pick_with with the process lever") {
  const ServicePtr service = make_service();
  Service cpp(0);
  const Fp8ActQuant& quant = cpp.fp8_act_quant();
  for (std::uint32_t m : {0u, 1u, 16u, 52u, 53u, 4096u, 0x7FFFFFFFu, 1u << 31})
    for (std::uint32_t k : {0u, 128u, 5120u, 7168u, 18432u, 128u * 65535, 128u * 65536}) {
      CAPTURE(m, k);
      kiln_fp8_pick pick = sized<kiln_fp8_pick>();
      const Fp8QuantPick expected = quant.pick_with(fp8_act_quant_hopper_enabled(), m, k, quant.sm_count());
      if (expected.refused()) {
        // Refused as the launch refuses it, and *out untouched.
        pick.twin = 7;
        CHECK_FAILS(kiln_fp8_act_quant_pick(service.get(), m, k, &pick), KILN_ERROR_INVALID_ARGUMENT,
                    error_of([&] { fp8_quant_require_launchable(expected, m, k); }));
        CHECK(pick.twin == 7);
        continue;
      }
      REQUIRE(kiln_fp8_act_quant_pick(service.get(), m, k, &pick) == KILN_OK);
      check_same_pick(pick, expected);
      CHECK((pick.kernel != 0) == expected.kernel.loaded());
      if (!gpu_here()) {
        CHECK(pick.kernel == 0);
        // An empty shape has no verdict; any other has the missing twin's.
        CHECK(pick.reject == (pick.noop ? KILN_FP8_REJECT_NONE : KILN_FP8_REJECT_ABSENT));
      }
    }

  kiln_fp8_pick pick = sized<kiln_fp8_pick>();
  CHECK_FAILS(kiln_fp8_act_quant_pick(nullptr, 1, 128, &pick), KILN_ERROR_INVALID_ARGUMENT, "'service'");
  CHECK_FAILS(kiln_fp8_act_quant_pick(service.get(), 1, 128, nullptr), KILN_ERROR_INVALID_ARGUMENT, "'out'");
  CHECK_FAILS(kiln_fp8_act_quant_pick(service.get(), 1, 100, &pick), KILN_ERROR_INVALID_ARGUMENT, "'k'");
  pick.struct_size = 8;
  CHECK_FAILS(kiln_fp8_act_quant_pick(service.get(), 1, 128, &pick), KILN_ERROR_INVALID_ARGUMENT, "struct_size");
}

TEST_CASE("C ABI: the quantizer family's pick is GroupQuant::pick, for the default variant and another") {
  CHECK(sizeof(kiln_quant_pick) == KILN_QUANT_PICK_V1_SIZE);
  CHECK(offsetof(kiln_quant_pick, kernel) == 16);
  CHECK(offsetof(kiln_quant_pick, block) == 36);
  CHECK(offsetof(kiln_quant_pick, grid) == 24);
  CHECK(offsetof(kiln_quant_pick, why) == 48);
  CHECK(offsetof(kiln_quant_pick, entry) == 64);
  CHECK(offsetof(kiln_quant_pick, reason) == 128);
  const ServicePtr service = make_service();
  Service cpp(0);
  kiln_quant_params params;
  REQUIRE(kiln_quant_params_init(&params) == KILN_OK);
  for (const std::int32_t output : {KILN_QUANT_OUT_E4M3, KILN_QUANT_OUT_INT8}) {
    params.output = output;
    QuantVariant variant;
    variant.output = static_cast<QuantOutput>(output);
    const GroupQuant quant = cpp.group_quant(variant);
    for (std::uint64_t m : {0ull, 1ull, 16ull, 4096ull, 8192ull})
      for (std::uint64_t k : {0ull, 128ull, 7168ull, 128ull * 65536}) {
        CAPTURE(output, m, k);
        alignas(16) static unsigned char stand_in[16];
        QuantArgs args;
        args.x = args.q = args.scales = stand_in;
        args.m = m;
        args.k = k;
        const QuantPick expected = quant.pick(cpp.gpu(), args);
        kiln_quant_pick pick = sized<kiln_quant_pick>();
        REQUIRE(kiln_quant_get_pick(service.get(), &params, m, k, &pick) == KILN_OK);
        CHECK(pick.noop == (expected.noop ? 1 : 0));
        if (expected.noop) {
          CHECK(pick.kernel_kind == -1);
          CHECK(std::string(pick.entry).empty());
          continue;
        }
        CHECK(pick.kernel_kind == static_cast<std::int32_t>(expected.kernel));
        CHECK(pick.grid[0] == expected.grid[0]);
        CHECK(pick.block[0] == expected.block);
        for (std::size_t i = 0; i < QUANT_KERNEL_COUNT; ++i) CHECK(pick.why[i] == static_cast<std::int32_t>(expected.why[i]));
        CHECK(std::string(pick.entry) == expected.entry);
        CHECK(std::string(pick.reason) == to_string(expected.reason()));
      }
  }
  kiln_quant_pick pick = sized<kiln_quant_pick>();
  CHECK_FAILS(kiln_quant_get_pick(nullptr, &params, 1, 128, &pick), KILN_ERROR_INVALID_ARGUMENT, "'service'");
  CHECK_FAILS(kiln_quant_get_pick(service.get(), &params, 1, 128, nullptr), KILN_ERROR_INVALID_ARGUMENT, "'out'");
  CHECK_FAILS(kiln_quant_get_pick(service.get(), &params, 1, 100, &pick), KILN_ERROR_INVALID_ARGUMENT, "'k'");
  params.group = 48;
  CHECK_FAILS(kiln_quant_get_pick(service.get(), &params, 1, 128, &pick), KILN_ERROR_INVALID_ARGUMENT, "'group'");
  params.group = 128;
  pick.struct_size = 8;
  CHECK_FAILS(kiln_quant_get_pick(service.get(), &params, 1, 128, &pick), KILN_ERROR_INVALID_ARGUMENT, "struct_size");
}

TEST_CASE("C ABI: the plan is Fp8ActQuant::pick_with for any device, lever and shape") {
  for (std::int32_t twin_present : {0, 1})
    for (std::int32_t lever : {KILN_FP8_LEVER_PROCESS, KILN_FP8_LEVER_OFF, KILN_FP8_LEVER_ON})
      for (std::uint32_t sm : {0u, 1u, 78u, 132u, 148u})
        for (std::uint32_t m : {0u, 1u, 15u, 16u, 43u, 44u, 52u, 53u, 4096u, 1u << 31})
          for (std::uint32_t k : {0u, 128u, 1024u, 5120u, 6144u, 17408u, 128u * 65535, 128u * 65536}) {
            CAPTURE(twin_present, lever, sm, m, k);
            kiln_fp8_pick pick = sized<kiln_fp8_pick>();
            const bool requested = lever == KILN_FP8_LEVER_PROCESS ? fp8_act_quant_hopper_enabled() : lever == 1;
            const Fp8ActQuant quant(KernelHandle{1}, twin_present ? KernelHandle{2} : KernelHandle{}, sm);
            const Fp8QuantPick expected = quant.pick_with(requested, m, k, sm);
            if (expected.refused()) {
              CHECK_FAILS(kiln_fp8_act_quant_plan(m, k, sm, twin_present, lever, &pick), KILN_ERROR_INVALID_ARGUMENT,
                          error_of([&] { fp8_quant_require_launchable(expected, m, k); }));
              continue;
            }
            REQUIRE(kiln_fp8_act_quant_plan(m, k, sm, twin_present, lever, &pick) == KILN_OK);
            check_same_pick(pick, expected);
            CHECK(pick.kernel == 0);
          }
}

TEST_CASE("C ABI: the plan's verdicts on an H200 and their texts") {
  kiln_fp8_pick pick = sized<kiln_fp8_pick>();
  REQUIRE(kiln_fp8_act_quant_plan(16, 5120, 132, 1, KILN_FP8_LEVER_ON, &pick) == KILN_OK);
  CHECK(pick.twin == 1);
  CHECK(pick.reject == KILN_FP8_REJECT_NONE);
  CHECK(std::string(pick.entry) == "per_token_group_quant_fp8_hopper");
  CHECK(std::string(pick.reason).empty());
  CHECK(pick.grid[0] == 40);  // 16 * 40 / 16
  CHECK(pick.grid[1] == 1);

  REQUIRE(kiln_fp8_act_quant_plan(15, 5120, 132, 1, KILN_FP8_LEVER_ON, &pick) == KILN_OK);
  CHECK(pick.twin == 0);
  CHECK(pick.reject == KILN_FP8_REJECT_TOO_FEW_CTAS);
  CHECK(std::string(pick.entry) == "per_token_group_quant_fp8");
  CHECK(std::string(pick.reason) == "too few CTAs to fill the device");
  CHECK(pick.grid[1] == 40);

  REQUIRE(kiln_fp8_act_quant_plan(4096, 5120, 132, 1, KILN_FP8_LEVER_OFF, &pick) == KILN_OK);
  CHECK(pick.reject == KILN_FP8_REJECT_NOT_REQUESTED);
  CHECK(pick.requested == 0);
  REQUIRE(kiln_fp8_act_quant_plan(4096, 5120, 132, 0, KILN_FP8_LEVER_ON, &pick) == KILN_OK);
  CHECK(pick.reject == KILN_FP8_REJECT_ABSENT);

  CHECK_FAILS(kiln_fp8_act_quant_plan(1, 128, 132, 2, KILN_FP8_LEVER_ON, &pick), KILN_ERROR_INVALID_ARGUMENT,
              "'twin_present'");
  CHECK_FAILS(kiln_fp8_act_quant_plan(1, 128, 132, 1, 5, &pick), KILN_ERROR_INVALID_ARGUMENT, "'lever'");
  CHECK_FAILS(kiln_fp8_act_quant_plan(1, 129, 132, 1, 1, &pick), KILN_ERROR_INVALID_ARGUMENT, "'k'");
  CHECK_FAILS(kiln_fp8_act_quant_plan(1, 128, 132, 1, 1, nullptr), KILN_ERROR_INVALID_ARGUMENT, "'out'");

  // The shapes of the review: no grid launch() would refuse, and no verdict for an empty shape.
  CHECK_FAILS(kiln_fp8_act_quant_plan(4294967295u, 128, 132, 1, KILN_FP8_LEVER_ON, &pick), KILN_ERROR_INVALID_ARGUMENT,
              "'m': expected at most 2^31-1 rows (grid X limit), got 4294967295");
  CHECK_FAILS(kiln_fp8_act_quant_plan(1, 8388608, 132, 1, KILN_FP8_LEVER_OFF, &pick), KILN_ERROR_INVALID_ARGUMENT,
              "'k': expected k/128 <= 65535 for the shared kernel (grid Y limit), got 8388608");
  REQUIRE(kiln_fp8_act_quant_plan(1, 8388608, 132, 1, KILN_FP8_LEVER_ON, &pick) == KILN_OK);
  CHECK(pick.twin == 1);
  CHECK(pick.grid[0] == 4096);  // 65536 groups, 16 a CTA
  for (const auto& [m, k] : {std::pair<std::uint32_t, std::uint32_t>{0, 7168}, {5, 0}}) {
    CAPTURE(m, k);
    pick = sized<kiln_fp8_pick>();
    pick.twin = 7;
    REQUIRE(kiln_fp8_act_quant_plan(m, k, 132, 1, KILN_FP8_LEVER_ON, &pick) == KILN_OK);
    CHECK(pick.noop == 1);
    CHECK(pick.twin == 0);
    CHECK(pick.grid[0] == 0);
    CHECK(pick.grid[1] == 0);
    CHECK(pick.grid[2] == 0);
    CHECK(pick.reject == KILN_FP8_REJECT_NONE);
    CHECK(std::string(pick.entry).empty());
    CHECK(std::string(pick.reason).empty());
  }
  // A version-1 caller gets the first 240 bytes and nothing past them.
  unsigned char v1[KILN_FP8_PICK_V2_SIZE];
  std::memset(v1, 0xAB, sizeof v1);
  kiln_fp8_pick* as_v1 = reinterpret_cast<kiln_fp8_pick*>(v1);
  as_v1->struct_size = KILN_FP8_PICK_V1_SIZE;
  REQUIRE(kiln_fp8_act_quant_plan(0, 7168, 132, 1, KILN_FP8_LEVER_ON, as_v1) == KILN_OK);
  CHECK(as_v1->grid[0] == 0);
  for (std::size_t i = KILN_FP8_PICK_V1_SIZE; i < sizeof v1; ++i) CHECK(v1[i] == 0xAB);
}

TEST_CASE("C ABI: the quantize launch refuses bad arguments before anything runs") {
  const ServicePtr service = make_service();
  // Never dereferenced: every call below fails validation (or, without a GPU, availability) first.
  void* const x = reinterpret_cast<void*>(0x10000);
  void* const q = reinterpret_cast<void*>(0x20000);
  float* const s = reinterpret_cast<float*>(0x30000);
  kiln_fp8_pick pick = sized<kiln_fp8_pick>();

  CHECK_FAILS(kiln_fp8_act_quant(nullptr, x, q, s, 1, 128, nullptr, nullptr), KILN_ERROR_INVALID_ARGUMENT,
              "'service'");
  CHECK_FAILS(kiln_fp8_act_quant(service.get(), x, q, s, 1, 100, nullptr, nullptr), KILN_ERROR_INVALID_ARGUMENT,
              "'k'");
  CHECK_FAILS(kiln_fp8_act_quant(service.get(), nullptr, q, s, 1, 128, nullptr, nullptr),
              KILN_ERROR_INVALID_ARGUMENT, "'x'");
  CHECK_FAILS(kiln_fp8_act_quant(service.get(), x, nullptr, s, 1, 128, nullptr, nullptr),
              KILN_ERROR_INVALID_ARGUMENT, "'q'");
  CHECK_FAILS(kiln_fp8_act_quant(service.get(), x, q, nullptr, 1, 128, nullptr, nullptr),
              KILN_ERROR_INVALID_ARGUMENT, "'scales'");
  CHECK_FAILS(kiln_fp8_act_quant(service.get(), static_cast<char*>(x) + 1, q, s, 1, 128, nullptr, nullptr),
              KILN_ERROR_INVALID_ARGUMENT, "'x'");
  CHECK_FAILS(kiln_fp8_act_quant(service.get(), x, q, reinterpret_cast<float*>(static_cast<char*>(q) + 2), 1, 128,
                                 nullptr, nullptr),
              KILN_ERROR_INVALID_ARGUMENT, "'scales'");
  pick.struct_size = 4;
  pick.twin = 7;
  CHECK_FAILS(kiln_fp8_act_quant(service.get(), x, q, s, 0, 128, nullptr, &pick), KILN_ERROR_INVALID_ARGUMENT,
              "struct_size");
  CHECK(pick.twin == 7);

  // An empty shape launches nothing, and says so.
  pick = sized<kiln_fp8_pick>();
  pick.twin = 7;
  REQUIRE(kiln_fp8_act_quant(service.get(), nullptr, nullptr, nullptr, 0, 128, nullptr, &pick) == KILN_OK);
  CHECK(pick.twin == 0);
  CHECK(pick.noop == 1);
  CHECK(pick.grid[0] == 0);
  CHECK(pick.grid[1] == 0);
  REQUIRE(kiln_fp8_act_quant(service.get(), nullptr, nullptr, nullptr, 3, 0, nullptr, nullptr) == KILN_OK);

  if (!gpu_here()) {
    CHECK_FAILS(kiln_fp8_act_quant(service.get(), x, q, s, 1, 128, nullptr, &pick), KILN_ERROR_UNAVAILABLE,
                "no quantizer kernel");
    kiln_device_info info = sized<kiln_device_info>();
    REQUIRE(kiln_service_device_info(service.get(), &info) == KILN_OK);
    REQUIRE(kiln_fp8_act_quant(service.get(), x, q, s, 1, 128, nullptr, nullptr) == KILN_ERROR_UNAVAILABLE);
    CHECK_THAT(last_error(), Catch::Contains(info.reason));
  }
}

TEST_CASE("C ABI: cache stats are the service's and the process's counters") {
  const ServicePtr service = make_service();
  Service cpp(0);
  kiln_cache_stats stats = sized<kiln_cache_stats>();
  REQUIRE(kiln_service_cache_stats(service.get(), &stats) == KILN_OK);
  const ServiceCounters counters = cpp.counters();
  const DiskCacheMode mode = process_disk_cache()->status().mode;
  CHECK(stats.disk_mode == (mode == DiskCacheMode::disabled      ? KILN_DISK_CACHE_DISABLED
                            : mode == DiskCacheMode::memory_only ? KILN_DISK_CACHE_MEMORY_ONLY
                                                                 : KILN_DISK_CACHE_READ_WRITE));
  // Both services share the process's disk cache, so its counters are the same object's.
  CHECK(stats.disk_hits == counters.disk.disk_hits);
  CHECK(stats.disk_misses == counters.disk.disk_misses);
  CHECK(stats.disk_compiles == counters.disk.compiles);
  CHECK(stats.corrupt_healed == counters.disk.corrupt_healed);
  if (!gpu_here()) {
    CHECK(stats.memory_hits == 0);
    CHECK(stats.compiles == 0);
    CHECK(stats.compile_ms == 0.0);
  }
  CHECK_FAILS(kiln_service_cache_stats(nullptr, &stats), KILN_ERROR_INVALID_ARGUMENT, "'service'");
  CHECK_FAILS(kiln_service_cache_stats(service.get(), nullptr), KILN_ERROR_INVALID_ARGUMENT, "'out'");
  stats.struct_size = KILN_CACHE_STATS_V1_SIZE - 8;
  CHECK_FAILS(kiln_service_cache_stats(service.get(), &stats), KILN_ERROR_INVALID_ARGUMENT, "struct_size");
}

TEST_CASE("C ABI: the last error is per thread, cleared by the next call, and never null") {
  CHECK(kiln_abi_version(nullptr) == KILN_ERROR_INVALID_ARGUMENT);
  const std::string mine = last_error();
  REQUIRE_THAT(mine, Catch::Contains("'abi'"));

  std::string other_before, other_after;
  std::thread other([&] {
    other_before = kiln_last_error();  // a fresh thread has no error
    std::uint32_t major = 0, minor = 0;
    kiln_version(&major, &minor, nullptr);
    other_after = kiln_last_error();
  });
  other.join();
  CHECK(other_before.empty());
  CHECK_THAT(other_after, Catch::Contains("'patch'"));
  CHECK(last_error() == mine);  // the other thread's failure did not touch this thread's error

  // The string queries do not reset it; any other call does.
  kiln_status_string(KILN_OK);
  CHECK(last_error() == mine);
  std::uint32_t abi = 0;
  REQUIRE(kiln_abi_version(&abi) == KILN_OK);
  REQUIRE(kiln_last_error() != nullptr);
  CHECK(last_error().empty());
}

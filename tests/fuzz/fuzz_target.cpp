// Fuzz target: compile target strings (`KILN_ARCH`, `kiln dump --arch`) and the target rule over
// whatever a driver and NVRTC might report.
//
// Input: 16 bytes of numbers (device compute capability, NVRTC and driver versions, presence
// bits, an arch count), then arch numbers (2 bytes each), then the text.
// Invariants: parse_target either throws kiln::Error or returns a target whose name parses back
// to it; parse_supported_target agrees with parse_target plus the arch list; select_target's
// target, when there is one, is an arch NVRTC listed, CUBIN for the device's own arch, PTX (never
// `a`) otherwise.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jit/target_select.hpp"
#include "kiln/error.hpp"

namespace {

using namespace kiln;

void require(bool condition) {
  if (!condition) std::abort();
}

struct Reader {
  const std::uint8_t* data;
  std::size_t size;
  int next(int bytes) {
    std::uint32_t value = 0;
    for (int i = 0; i < bytes; ++i) {
      value = value << 8 | (size ? *data : 0u);
      if (size) ++data, --size;
    }
    return static_cast<int>(value);
  }
};

std::optional<Target> parsed(std::string_view text) {
  try {
    return parse_target(text);
  } catch (const Error& e) {
    // Why only without NUL: what() is a C string, so a NUL in the quoted text ends the message there.
    if (text.find('\0') == std::string_view::npos) require(std::string(e.what()).find("expected") != std::string::npos);
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  TargetInputs inputs;
  inputs.device = {static_cast<std::int8_t>(in.next(1)), static_cast<std::int8_t>(in.next(1))};
  const int flags = in.next(1);
  const Version nvrtc{in.next(1), in.next(1)};
  const Version driver{in.next(1), in.next(1)};
  if (flags & 1) inputs.nvrtc = nvrtc;
  if (flags & 2) inputs.driver = driver;
  if (flags & 4) inputs.device = {in.next(4), in.next(4)};  // anything a broken driver could report
  const int count = in.next(1) % 24;
  for (int i = 0; i < count; ++i) inputs.nvrtc_archs.push_back(static_cast<std::int16_t>(in.next(2)));
  if (flags & 8) std::sort(inputs.nvrtc_archs.begin(), inputs.nvrtc_archs.end());
  const std::string_view text(reinterpret_cast<const char*>(in.data), in.size);

  const auto target = parsed(text);
  if (target) {
    const auto again = parsed(target->name());
    require(again && *again == *target);
    require(!target->arch_specific || target->cc.number() >= 90);
  }
  const bool known = target && (inputs.nvrtc_archs.empty() ||
                                std::count(inputs.nvrtc_archs.begin(), inputs.nvrtc_archs.end(),
                                           target->cc.number()) > 0);
  try {
    const Target supported = parse_supported_target(text, inputs.nvrtc_archs, "KILN_ARCH");
    require(known && supported == *target);
  } catch (const Error& e) {
    require(!known);
    require(std::string(e.what()).rfind("KILN_ARCH: ", 0) == 0);
  }

  const TargetChoice choice = select_target(inputs);
  require(!choice.reason.empty());
  if (choice.target) {
    const Target& chosen = *choice.target;
    require(inputs.nvrtc.has_value());
    require(std::count(inputs.nvrtc_archs.begin(), inputs.nvrtc_archs.end(), chosen.cc.number()) > 0);
    if (chosen.kind == OutputKind::cubin) {
      require(chosen.cc == inputs.device);
      require(chosen.arch_specific == (chosen.cc.number() >= 90));
    } else {
      require(!chosen.arch_specific);
      require(chosen.cc.number() <= inputs.device.number());
    }
    for (const char* family : {"common", "hopper", ""}) (void)chosen.carries(family);
    (void)chosen.carries(text);
  }
  const auto all = nvrtc_targets(inputs.nvrtc_archs);
  require(std::is_sorted(all.begin(), all.end(), [](const Target& a, const Target& b) {
    return a.cc.number() < b.cc.number();
  }));
  return 0;
}

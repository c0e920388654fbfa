// An embedder outside kiln's tree: only the installed public headers and `pkg-config kiln`.
#include <cstdio>
#include <cstring>

#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/service.hpp"
#include "kiln/version.hpp"

int main() {
  kiln::Service service(0);
  const kiln::ops::Fp8ActQuant& quant = service.fp8_act_quant();
  const kiln::ops::Fp8QuantPick pick = quant.pick_with(true, 4096, 7168, 132);
  const kiln::ServiceCounters counters = service.counters();
  std::printf("kiln %.*s; available %d (%s); shared %d twin %d; grid (%u, %u, %u); compiles %llu\n",
              static_cast<int>(kiln::version_string().size()), kiln::version_string().data(), service.available(),
              service.unavailable_reason().c_str(), quant.shared().loaded(), quant.twin_present(), pick.grid[0],
              pick.grid[1], pick.grid[2], static_cast<unsigned long long>(counters.memory.compiles));
  // Without a usable GPU no kernel may be resolved; with one, the shared kernel must be.
  if (service.available() != quant.shared().loaded()) return 1;
  // The quantizer family through the exported API (libkiln is built with hidden visibility).
  const kiln::ops::GroupQuant family = service.group_quant(kiln::ops::QuantVariant{});
  std::printf("%zu variants; %s available %d\n", kiln::ops::every_quant_variant().size(),
              family.variant().module_name().c_str(), family.available());
  try {
    quant.launch(service.gpu(), nullptr, nullptr, nullptr, 1, 100, nullptr);
    return 1;  // k = 100 must be refused before any launch
  } catch (const kiln::Error& error) {
    std::printf("refused: %s\n", error.what());
    return std::strstr(error.what(), "'k'") != nullptr ? 0 : 1;
  }
}

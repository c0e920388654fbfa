// Every embedded module compiles without a single NVRTC warning, for every target that carries it.
// A warning in a shared header lands in every dump's .log and in every failed compile's message, where
// it hides the line that matters; NVRTC runs here without a GPU.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "jit/registry.hpp"
#include "jit/target_select.hpp"

using namespace kiln;

TEST_CASE("NVRTC compiles every embedded module for every target it carries without a warning") {
  const auto archs = nvrtc_supported_archs();
  REQUIRE_FALSE(archs.empty());
  std::vector<Target> targets = nvrtc_targets(archs);
  // Why also PTX: a GPU newer than NVRTC gets compute_XX PTX, which takes the same code paths.
  targets.push_back(Target{compute_capability_of(archs.back()), false, OutputKind::ptx});

  std::size_t compiled = 0;
  for (const auto& source : embedded_modules())
    for (const auto& target : targets) {
      if (!target.carries(source.family)) continue;
      CAPTURE(source.module, target.name());
      const CompiledModule module = compile_module(source, target, compile_options(target, false));
      ++compiled;
      // NVRTC words every diagnostic "warning #NNNN-D" (or "error"); a clean compile logs nothing
      // but whitespace.
      CHECK(module.log.find("warning") == std::string::npos);
      CHECK(module.log.find_first_not_of(std::string(" \t\r\n\0", 5)) == std::string::npos);
    }
  // The shared module on every arch, the twin on sm_90a (and the shared PTX).
  CHECK(compiled >= archs.size() + 2);
}

TEST_CASE("variants covering every parameter value compile without a warning on the oldest, Hopper and newest arch") {
  const auto archs = nvrtc_supported_archs();
  REQUIRE_FALSE(archs.empty());
  const std::vector<Target> targets = {Target{compute_capability_of(archs.front()), false, OutputKind::cubin},
                                       Target{ComputeCapability{9, 0}, true, OutputKind::cubin},
                                       Target{compute_capability_of(archs.back()), false, OutputKind::ptx}};
  const char* covering[] = {
      "per_token_group_quant-bf16-g32-e4m3-row",
      "per_token_group_quant-fp16-g64-int8-col-silu",
      "per_token_group_quant-fp32-g128-e4m3-col_tma-ue8m0",
      "per_token_group_quant-bf16-g64-e4m3-packed-ue8m0-silu",
      "per_token_group_quant-fp32-g32-int8-row-silu",
      "per_token_group_quant-fp16-g128-e4m3-row-ue8m0",
      "per_token_group_quant-bf16-g32-e4m3-row-silu",  // two groups per slot with SiLU, 4 CTAs per SM
  };
  for (const char* name : covering) {
    const KernelSource* source = find_module(name);
    REQUIRE(source != nullptr);
    for (const auto& target : targets) {
      CAPTURE(name, target.name());
      const CompiledModule module = compile_module(*source, target, compile_options(target, false));
      CAPTURE(module.log);
      CHECK(module.log.find_first_not_of(std::string(" \t\r\n\0", 5)) == std::string::npos);
    }
  }
}

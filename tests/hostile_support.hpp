#pragma once
// Shared by the hostile tests: a target chooser, and a module provider shaped like
// make_module_provider (a real DiskCache in front) with a fake compile behind it, so whole stacks
// run fast on the fake driver.

#include <atomic>
#include <memory>
#include <string>

#include "cache/cache_key.hpp"
#include "cache/disk/disk_cache.hpp"
#include "runtime/module_provider.hpp"
#include "runtime/cuda_backend.hpp"
#include "fake_driver.hpp"
#include "jit/target_select.hpp"

namespace kiln::test {

inline TargetChooser always(Target target) {
  return [target](const DeviceInfo&, std::optional<Version>) { return TargetChoice{target, "test"}; };
}

/// What the fake compile returns: the fake driver's image of `source`.
inline CompiledModule fake_compiled(const KernelSource& source, const Target& target) {
  CompiledModule module;
  module.module = source.module;
  module.target = target;
  module.cubin = fake_cubin(source.module, source.entries);
  module.ptx = "// fake";
  return module;
}

/// `disk` in front of fake_compiled, counting compiles in `compiles` (which must outlive the
/// provider). `variant` is part of every key, so different variants are different entries.
inline ModuleProvider disk_provider(const std::shared_ptr<DiskCache>& disk, int variant, std::atomic<int>& compiles) {
  const auto key = [variant](const KernelSource& source, const Target& target) {
    CacheKeyInputs inputs;
    inputs.nvrtc_build = "build-id test";
    const std::string name = target.name();
    inputs.target = name;
    inputs.options = {"-arch=" + name, "--variant=" + std::to_string(variant)};
    inputs.module = source.module;
    inputs.source = source.text;
    return make_cache_key(inputs);
  };
  ModuleProvider provider;
  provider.provide = [disk, key, &compiles](const KernelSource& source, const Target& target) {
    auto result = disk->load_or_compile(key(source, target), source.module, target, [&] {
      ++compiles;
      return fake_compiled(source, target);
    });
    const bool from_disk = result.outcome == CacheOutcome::hit || result.outcome == CacheOutcome::hit_after_wait;
    return ProvidedModule{std::move(result.module), from_disk};
  };
  provider.evict = [disk, key](const KernelSource& source, const CompiledModule& module) {
    disk->evict(key(source, module.target), source.module, module.target);
  };
  return provider;
}

}  // namespace kiln::test

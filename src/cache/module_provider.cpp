#include "cache/module_provider.hpp"

#include "cache/disk/disk_cache.hpp"
#include "jit/compiler.hpp"
#include "jit/dump.hpp"
#include "jit/nvrtc.hpp"

namespace kiln {

CacheKey module_cache_key(const KernelSource& source, const Target& target, const std::vector<std::string>& options) {
  static const Version nvrtc = nvrtc_version().value_or(Version{});
  // Why a reference to a static: nvrtc_build() works out the build once; every later key only hashes it.
  static const std::string& build = nvrtc_build();
  CacheKeyInputs inputs;
  inputs.nvrtc = nvrtc;
  inputs.nvrtc_build = build;
  const std::string target_name = target.name();
  inputs.target = target_name;
  inputs.kind = target.kind;
  inputs.options = options;
  inputs.module = source.module;
  inputs.source = source.text;
  inputs.headers = embedded_headers();
  return make_cache_key(inputs);
}

ModuleProvider make_module_provider(std::shared_ptr<DiskCache> disk, Compiler compiler) {
  ModuleProvider provider;
  provider.provide = [disk, compiler](const KernelSource& source, const Target& target) {
    const CacheKey key = module_cache_key(source, target, compiler.options(target));
    CacheResult result = disk->load_or_compile(key, source.module, target, [&] { return compiler.compile(source, target); });
    const bool from_disk = result.outcome == CacheOutcome::hit || result.outcome == CacheOutcome::hit_after_wait;
    // Why: the compiler dumps what it compiles; a disk hit is dumped here so KILN_DUMP_DIR shows
    // every module this process loaded.
    if (from_disk) dump_if_requested(result.module, source);
    return ProvidedModule{std::move(result.module), from_disk};
  };
  provider.evict = [disk](const KernelSource& source, const CompiledModule& module) {
    disk->evict(module_cache_key(source, module.target, module.options), source.module, module.target);
  };
  return provider;
}

std::shared_ptr<DiskCache> process_disk_cache() {
  static const std::shared_ptr<DiskCache> cache = std::make_shared<DiskCache>(DiskCacheConfig::from_env(nvrtc_version()));
  return cache;
}

}  // namespace kiln

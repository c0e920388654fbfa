#include "cache/module_provider.hpp"

#include "cache/disk/disk_cache.hpp"
#include "cache/remote/remote_cache.hpp"
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

ModuleProvider make_module_provider(std::shared_ptr<DiskCache> disk, Compiler compiler,
                                    std::shared_ptr<RemoteCache> remote) {
  ModuleProvider provider;
  provider.provide = [disk, compiler, remote](const KernelSource& source, const Target& target) {
    const CacheKey key = module_cache_key(source, target, compiler.options(target));
    bool from_remote = false;
    // Why Redis inside the disk tier's compile step: the node's per-key file lock is then held
    // while Redis is asked, so one process per node asks, and a remote hit lands on disk for the
    // next process.
    CacheResult result = disk->load_or_compile(key, source.module, target, [&] {
      if (!remote) return compiler.compile(source, target);
      auto fetched = remote->fetch_or_compile(key, source.module, target, [&] { return compiler.compile(source, target); });
      from_remote = fetched.from_remote;
      return std::move(fetched.module);
    });
    const bool from_disk =
        from_remote || result.outcome == CacheOutcome::hit || result.outcome == CacheOutcome::hit_after_wait;
    // Why: the compiler dumps what it compiles; a disk hit is dumped here so KILN_DUMP_DIR shows
    // every module this process loaded.
    if (from_disk) dump_if_requested(result.module, source);
    return ProvidedModule{std::move(result.module), from_disk};
  };
  provider.evict = [disk, remote](const KernelSource& source, const CompiledModule& module) {
    const CacheKey key = module_cache_key(source, module.target, module.options);
    disk->evict(key, source.module, module.target);
    if (remote) remote->distrust(key);
  };
  return provider;
}

std::shared_ptr<DiskCache> process_disk_cache() {
  static const std::shared_ptr<DiskCache> cache = std::make_shared<DiskCache>(DiskCacheConfig::from_env(nvrtc_version()));
  return cache;
}

}  // namespace kiln

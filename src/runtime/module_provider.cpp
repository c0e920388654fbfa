#include "runtime/module_provider.hpp"

#include "cache/cache_layer.hpp"
#include "cache/cache_path.hpp"
#include "cache/disk/disk_cache.hpp"
#include "cache/remote/remote_cache.hpp"
#include "jit/compiler.hpp"
#include "jit/dump.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"
#include "kiln/error.hpp"

namespace kiln {

CacheKey module_cache_key(const KernelSource& source, const Target& target, const std::vector<std::string>& options) {
  // Why a reference to a static: nvrtc_build() works out the build once; every later key only hashes it.
  static const std::string& build = nvrtc_build();
  return module_cache_key(source, target, options, build);
}

CacheKey module_cache_key(const KernelSource& source, const Target& target, const std::vector<std::string>& options,
                          std::string_view nvrtc_build) {
  CacheKeyInputs inputs;
  inputs.nvrtc_build = nvrtc_build;
  const std::string target_name = target.name();
  inputs.target = target_name;
  inputs.kind = target.kind;
  inputs.options = options;
  inputs.module = source.module;
  inputs.source = source.text;
  inputs.headers = embedded_headers();
  return make_cache_key(inputs);
}

namespace {

/// Where a module was looked for, for the reason of a miss; `remote` null when Redis was not asked.
std::string searched(const std::vector<std::shared_ptr<CacheLayer>>& layers, const DiskCache& disk,
                     const RemoteCache* remote) {
  std::string out;
  for (const auto& layer : layers) out += (out.empty() ? "" : ", ") + layer->report().path;
  const DiskCacheStatus status = disk.status();
  if (status.mode == DiskCacheMode::read_write) out += (out.empty() ? "" : ", ") + status.dir;
  if (remote != nullptr) out += (out.empty() ? "" : ", ") + std::string("Redis at ") + remote->status().endpoint;
  return out.empty() ? "no cache layer" : out;
}

}  // namespace

ModuleProvider make_module_provider(std::shared_ptr<DiskCache> disk, Compiler compiler,
                                    std::vector<std::shared_ptr<CacheLayer>> layers, std::shared_ptr<RemoteCache> remote) {
  ModuleProvider provider;
  provider.provide = [disk, compiler, layers, remote](const KernelSource& source, const Target& target) {
    const std::vector<std::string> options = compiler.options(target);
    const std::string& own_build = nvrtc_build();
    const CacheKey key = module_cache_key(source, target, options, own_build);
    for (const auto& layer : layers) {
      // Why the layer's own build only without an NVRTC: with one, its build decides what matches,
      // so a bundle from another NVRTC misses by key and is never loaded.
      std::optional<CompiledModule> found;
      if (!own_build.empty()) {
        found = layer->find(key, source.module, target);
      } else if (const std::string recorded = layer->recorded_nvrtc_build(); !recorded.empty()) {
        found = layer->find(module_cache_key(source, target, options, recorded), source.module, target);
      }
      if (found) {
        dump_if_requested(*found, source);
        return ProvidedModule{std::move(*found), true};
      }
    }
    const std::string what = "module '" + source.module + "' for " + target.name();
    if (!jit_enabled() || own_build.empty()) {
      // Why Redis only with NVRTC's build: the fleet's keys name it, and without it none matches.
      const RemoteCache* asked_remote = !own_build.empty() && remote && remote->enabled() ? remote.get() : nullptr;
      if (!own_build.empty())
        if (auto found = disk->load(key, source.module, target)) {
          dump_if_requested(*found, source);
          return ProvidedModule{std::move(*found), true};
        }
      // Why no lease: nothing is compiled here, so there is no compile to share with the fleet.
      if (asked_remote != nullptr)
        if (auto fetched = remote->fetch(key, source.module, target)) {
          disk->store(key, *fetched);
          dump_if_requested(*fetched, source);
          return ProvidedModule{std::move(*fetched), true};
        }
      // Why permanent: KILN_JIT and the NVRTC found are fixed for the process.
      if (!jit_enabled())
        throw_error(ErrorKind::unavailable, Retry::permanent,
                    "KILN_JIT=off: " + what + " is in no cache layer (searched: " +
                        searched(layers, *disk, asked_remote) + "); pack it with `kiln pack --arch " +
                        target.name() + "` or allow compiling (KILN_JIT=on)",
                    {"KILN_JIT", source.module, target.name(), options, {}});
      throw_error(ErrorKind::unavailable, Retry::permanent,
                  what + " is in no bundle, and there is no NVRTC to compile it (" + nvrtc_absence() + ")",
                  {"nvrtc_api", source.module, target.name(), options, {}});
    }
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
  static const std::shared_ptr<DiskCache> cache = std::make_shared<DiskCache>(process_cache_path().writable);
  return cache;
}

}  // namespace kiln

#include "runtime/prefetch.hpp"

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

std::vector<const KernelSource*> carried_modules(const Target& target) {
  std::vector<const KernelSource*> carried;
  for (const KernelSource& source : embedded_modules())
    if (target.carries(source.family)) carried.push_back(&source);
  return carried;
}

namespace {

struct Prefetched {
  std::mutex mutex;
  std::map<std::string, std::future<ProvidedModule>, std::less<>> pending;

  // Nothing when `module` was not prefetched or was already taken.
  std::optional<std::future<ProvidedModule>> take(std::string_view module) {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = pending.find(module);
    if (found == pending.end()) return std::nullopt;
    std::future<ProvidedModule> result = std::move(found->second);
    pending.erase(found);
    return result;
  }
};

}  // namespace

ModuleProvider prefetching_provider(ModuleProvider inner, const Target& target,
                                    const std::vector<const KernelSource*>& modules) {
  auto prefetched = std::make_shared<Prefetched>();
  for (const KernelSource* source : modules)
    prefetched->pending.emplace(source->module, std::async(std::launch::async, [inner, source, target] {
                                  return inner.provide(*source, target);
                                }));
  ModuleProvider provider;
  provider.provide = [inner, prefetched, target](const KernelSource& source, const Target& wanted) {
    if (wanted == target)
      if (auto result = prefetched->take(source.module)) return result->get();
    return inner.provide(source, wanted);
  };
  provider.evict = inner.evict;
  return provider;
}

}  // namespace kiln

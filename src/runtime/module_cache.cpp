#include "runtime/module_cache.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "driver/primary_context.hpp"
#include "runtime/module_loader.hpp"

namespace kiln {

// The single-flight memory cache: which modules are loaded, pending or failed, and who waits. The
// driver work is the loader's (module_loader), the handles are the table's (handle_table).
class ModuleCache::Impl {
 public:
  Impl(const driver::PrimaryContext& context, Target target, ModuleProvider provider, SourceLookup sources)
      : loader_(context, std::move(target), std::move(provider)), sources_(std::move(sources)),
        handles_(context.ordinal(), loader_.target().name()) {}

  KernelHandle kernel(std::string_view module, std::string_view entry, FamilyRule rule) noexcept;
  LoadedKernel resolve(KernelHandle handle) const { return handles_.resolve(handle); }
  void clear() noexcept;
  ModuleCacheCounters counters() const noexcept;
  std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

  const Target& target() const noexcept { return loader_.target(); }
  int device() const noexcept { return loader_.device(); }

 private:
  enum class State { pending, loaded, failed };

  /// One module: written under the exclusive lock, read under either.
  struct Slot {
    Slot(const KernelSource& source, bool carried) : source(source), carried(carried) {}
    const KernelSource& source;
    const bool carried;  ///< the target carries the module's family
    State state = State::pending;
    std::vector<KernelHandle> handles;  ///< one per entry of `source`, in order; they own the module
  };

  static KernelHandle handle_of(const Slot& slot, std::string_view entry) noexcept {
    for (std::size_t i = 0; i < slot.handles.size(); ++i)
      if (slot.source.entries[i] == entry) return slot.handles[i];
    return {};
  }

  /// The slot of `module`, or null; under either lock.
  const std::shared_ptr<Slot>* find(std::string_view module) const noexcept {
    for (const auto& slot : slots_)
      if (slot->source.module == module) return &slot;
    return nullptr;
  }

  KernelHandle load_and_publish(const KernelSource& source, std::string_view entry);
  void publish(Slot& slot, driver::LoadResult&& outcome);

  driver::ModuleLoader loader_;
  const SourceLookup sources_;
  HandleTable handles_;

  mutable std::shared_mutex mutex_;
  std::condition_variable_any loaded_;  ///< signalled when a slot leaves `pending`
  // Why a vector: a device holds a handful of modules, and scanning them is the cheapest lookup by
  // string_view. Why shared_ptr: a thread waiting on a slot keeps it alive if clear() drops it
  // between the load landing and the waiter waking.
  std::vector<std::shared_ptr<Slot>> slots_;
  std::set<std::string> retrying_;  ///< modules whose transient failure was warned about, until they load

  std::atomic<std::uint64_t> memory_hits_{0}, lock_waits_{0}, failures_{0};
  std::atomic<std::uint64_t> generation_{0};
};

KernelHandle ModuleCache::Impl::kernel(std::string_view module, std::string_view entry, FamilyRule rule) noexcept {
  try {
    {
      std::shared_lock lock(mutex_);
      if (const auto* found = find(module); found != nullptr && (*found)->state != State::pending) {
        const Slot& slot = **found;
        if (rule == FamilyRule::carried_by_target && !slot.carried) return {};
        memory_hits_.fetch_add(1, std::memory_order_relaxed);
        return handle_of(slot, entry);
      }
    }
    const KernelSource* source = sources_(module);
    if (source == nullptr) {
      logger().debug("device {}: no module '{}'", device(), module);
      return {};
    }
    if (rule == FamilyRule::carried_by_target && !target().carries(source->family)) return {};
    if (std::find(source->entries.begin(), source->entries.end(), entry) == source->entries.end()) {
      logger().debug("device {}: module '{}' has no entry '{}'", device(), module, entry);
      return {};
    }
    return load_and_publish(*source, entry);
  } catch (const std::exception& error) {
    logger().error("device {}: looking up '{}' in module '{}' failed: {}", device(), entry, module, error.what());
  } catch (...) {
    logger().error("device {}: looking up '{}' in module '{}' failed", device(), entry, module);
  }
  return {};
}

KernelHandle ModuleCache::Impl::load_and_publish(const KernelSource& source, std::string_view entry) {
  auto fresh = std::make_shared<Slot>(source, target().carries(source.family));
  std::unique_lock lock(mutex_);
  if (const auto* found = find(source.module); found != nullptr) {
    const std::shared_ptr<Slot> slot = *found;
    if (slot->state == State::pending) {
      lock_waits_.fetch_add(1, std::memory_order_relaxed);
      loaded_.wait(lock, [&slot] { return slot->state != State::pending; });
    } else {
      memory_hits_.fetch_add(1, std::memory_order_relaxed);
    }
    return handle_of(*slot, entry);
  }
  slots_.push_back(fresh);
  Slot* slot = fresh.get();

  // Why: the lock is not held while compiling, so other modules load in parallel; this slot stays
  // pending, and only its own callers wait. A pending slot is never erased (clear() skips it).
  lock.unlock();
  driver::LoadResult outcome = loader_.load(source);
  lock.lock();
  publish(*slot, std::move(outcome));
  loaded_.notify_all();
  return handle_of(*slot, entry);
}

void ModuleCache::Impl::publish(Slot& slot, driver::LoadResult&& outcome) {
  if (outcome.module != nullptr) {
    try {
      slot.handles = handles_.add(outcome.module, slot.source.entries);
      slot.state = State::loaded;
      retrying_.erase(slot.source.module);
      logger().debug("device {}: loaded '{}' for {}", device(), slot.source.module, target().name());
      return;
    } catch (const std::exception& error) {
      // Why no retire: add() threw, so no handle of this module reached anyone.
      outcome.module.reset();
      outcome.reason = error.what();
    }
  }
  slot.state = State::failed;
  failures_.fetch_add(1, std::memory_order_relaxed);
  if (outcome.permanent) {
    logger().warn("device {}: module '{}' is unavailable for {}: {}", device(), slot.source.module, target().name(),
                  outcome.reason);
    return;
  }
  // Why forget it: out of memory or a driver hiccup now says nothing about the next request, so the
  // callers waiting on this load get 0 and the next request loads afresh.
  slots_.erase(std::find_if(slots_.begin(), slots_.end(), [&](const auto& held) { return held.get() == &slot; }));
  generation_.fetch_add(1, std::memory_order_acq_rel);
  // Why once per module until it loads: a device that is gone fails every retry the same way.
  const bool first = retrying_.insert(slot.source.module).second;
  logger().log(first ? spdlog::level::warn : spdlog::level::debug,
               "device {}: module '{}' failed to load for {} (the next request tries again): {}", device(),
               slot.source.module, target().name(), outcome.reason);
}

void ModuleCache::Impl::clear() noexcept {
  std::unique_lock lock(mutex_);
  for (auto& slot : slots_) {
    if (slot->state == State::pending) continue;
    handles_.retire(slot->handles);
    slot.reset();
  }
  slots_.erase(std::remove(slots_.begin(), slots_.end(), nullptr), slots_.end());
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

ModuleCacheCounters ModuleCache::Impl::counters() const noexcept {
  ModuleCacheCounters out;
  out.memory_hits = memory_hits_.load(std::memory_order_relaxed);
  out.lock_waits = lock_waits_.load(std::memory_order_relaxed);
  out.failures = failures_.load(std::memory_order_relaxed);
  loader_.add_counters(out);
  return out;
}

ModuleCache::ModuleCache(const driver::PrimaryContext& context, Target target, ModuleProvider provider,
                         SourceLookup sources)
    : impl_(std::make_unique<Impl>(context, std::move(target), std::move(provider), std::move(sources))) {}
ModuleCache::~ModuleCache() = default;

const Target& ModuleCache::target() const noexcept { return impl_->target(); }
int ModuleCache::device() const noexcept { return impl_->device(); }
KernelHandle ModuleCache::kernel(std::string_view module, std::string_view entry, FamilyRule rule) noexcept {
  return impl_->kernel(module, entry, rule);
}
LoadedKernel ModuleCache::resolve(KernelHandle handle) const { return impl_->resolve(handle); }
void ModuleCache::clear() noexcept { impl_->clear(); }
ModuleCacheCounters ModuleCache::counters() const noexcept { return impl_->counters(); }
std::uint64_t ModuleCache::generation() const noexcept { return impl_->generation(); }

}  // namespace kiln

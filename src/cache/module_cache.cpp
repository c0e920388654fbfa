#include "cache/module_cache.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "driver/driver_check.hpp"
#include "driver/primary_context.hpp"
#include "kiln/error.hpp"
#include "base/log.hpp"

namespace kiln {

namespace {

// A handle is (cache id << 32) | (record index + 1): nonzero, never reused within a process
// (ids are never reused, record indices only grow), and checkable without dereferencing anything.
constexpr int ID_SHIFT = 32;
constexpr std::uint64_t INDEX_MASK = (std::uint64_t{1} << ID_SHIFT) - 1;

std::uint64_t next_cache_id() {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

// Results that say the image itself is bad, so evicting it from disk and compiling again can help.
bool is_bad_image(CUresult result) {
  switch (result) {
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_SOURCE:
      return true;
    default:
      return false;
  }
}

std::string describe(const std::exception& error) {
  std::string text = error.what();
  if (const auto* kiln_error = dynamic_cast<const Error*>(&error); kiln_error && !kiln_error->context().log.empty())
    text += "\nNVRTC log:\n" + kiln_error->context().log;
  return text;
}

}  // namespace

class ModuleCache::Impl {
 public:
  Impl(const driver::PrimaryContext& context, Target target, ModuleProvider provider, SourceLookup sources)
      : api_(context.api()), context_(context), target_(std::move(target)), target_name_(target_.name()),
        provider_(std::move(provider)), sources_(std::move(sources)), id_(next_cache_id()) {}

  ~Impl() {
    for (const auto& slot : slots_)
      if (slot->state == State::loaded) unload(slot->source.module, slot->module);
  }

  KernelHandle kernel(std::string_view module, std::string_view entry, FamilyRule rule) noexcept;
  LoadedKernel resolve(KernelHandle handle) const;
  void clear() noexcept;
  ModuleCacheCounters counters() const noexcept;

  const Target& target() const noexcept { return target_; }
  int device() const noexcept { return context_.ordinal(); }

 private:
  enum class State { pending, loaded, failed };

  /// One module: written under the exclusive lock, read under either.
  struct Slot {
    Slot(const KernelSource& source, bool carried) : source(source), carried(carried) {}
    const KernelSource& source;
    const bool carried;  ///< the target carries the module's family
    State state = State::pending;
    CUmodule module = nullptr;
    std::vector<std::pair<std::string_view, KernelHandle>> kernels;  ///< entry -> handle
    std::size_t first_record = 0;                                    ///< records of `kernels`, in order
  };

  /// What a handle points at. Records are never erased, so handle checks and the views in
  /// LoadedKernel stay valid; clear() nulls `function`.
  struct Record {
    std::string module;
    std::string entry;
    CUfunction function = nullptr;
  };

  /// The result of one load attempt, built without the lock.
  struct Outcome {
    CUmodule module = nullptr;  ///< null: failed
    std::vector<CUfunction> functions;  ///< one per source entry
    std::string reason;
  };

  KernelHandle handle_of(const Slot& slot, std::string_view entry) const noexcept {
    for (const auto& [name, handle] : slot.kernels)
      if (name == entry) return handle;
    return {};
  }

  /// The slot of `module`, or null; under either lock.
  const std::shared_ptr<Slot>* find(std::string_view module) const noexcept {
    for (const auto& slot : slots_)
      if (slot->source.module == module) return &slot;
    return nullptr;
  }

  KernelHandle load_and_publish(const KernelSource& source, std::string_view entry);
  Outcome load(const KernelSource& source) noexcept;
  void load_once(const KernelSource& source, const ProvidedModule& provided, Outcome& outcome, CUresult& result,
                 std::string& jit_log);
  void publish(Slot& slot, const KernelSource& source, Outcome&& outcome);
  void unload(std::string_view name, CUmodule module) noexcept;

  const driver::DriverApi& api_;
  const driver::PrimaryContext& context_;
  const Target target_;
  const std::string target_name_;
  const ModuleProvider provider_;
  const SourceLookup sources_;
  const std::uint64_t id_;

  mutable std::shared_mutex mutex_;
  std::condition_variable_any loaded_;  ///< signalled when a slot leaves `pending`
  // Why a vector: a device holds a handful of modules, and scanning them is the cheapest lookup by
  // string_view. Why shared_ptr: a thread waiting on a slot keeps it alive if clear() drops it
  // between the load landing and the waiter waking.
  std::vector<std::shared_ptr<Slot>> slots_;
  std::deque<Record> records_;

  struct Counters {
    std::atomic<std::uint64_t> memory_hits{0}, lock_waits{0}, disk_hits{0}, compiles{0}, compile_us{0},
        load_refused{0}, failures{0};
  };
  mutable Counters counters_;
};

KernelHandle ModuleCache::Impl::kernel(std::string_view module, std::string_view entry, FamilyRule rule) noexcept {
  try {
    {
      std::shared_lock lock(mutex_);
      if (const auto* found = find(module); found != nullptr && (*found)->state != State::pending) {
        const Slot& slot = **found;
        if (rule == FamilyRule::carried_by_target && !slot.carried) return {};
        counters_.memory_hits.fetch_add(1, std::memory_order_relaxed);
        return handle_of(slot, entry);
      }
    }
    const KernelSource* source = sources_(module);
    if (source == nullptr) {
      logger().debug("device {}: no module '{}'", device(), module);
      return {};
    }
    if (rule == FamilyRule::carried_by_target && !target_.carries(source->family)) return {};
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
  auto fresh = std::make_shared<Slot>(source, target_.carries(source.family));
  std::unique_lock lock(mutex_);
  if (const auto* found = find(source.module); found != nullptr) {
    const std::shared_ptr<Slot> slot = *found;
    if (slot->state == State::pending) {
      counters_.lock_waits.fetch_add(1, std::memory_order_relaxed);
      loaded_.wait(lock, [&slot] { return slot->state != State::pending; });
    } else {
      counters_.memory_hits.fetch_add(1, std::memory_order_relaxed);
    }
    return handle_of(*slot, entry);
  }
  slots_.push_back(fresh);
  Slot* slot = fresh.get();

  // Why: the lock is not held while compiling, so other modules load in parallel; this slot stays
  // pending, and only its own callers wait. A pending slot is never erased (clear() skips it).
  lock.unlock();
  Outcome outcome = load(source);
  lock.lock();
  publish(*slot, source, std::move(outcome));
  loaded_.notify_all();
  return handle_of(*slot, entry);
}

ModuleCache::Impl::Outcome ModuleCache::Impl::load(const KernelSource& source) noexcept {
  Outcome outcome;
  try {
    for (int attempt = 0;; ++attempt) {
      const ProvidedModule provided = provider_.provide(source, target_);
      if (provided.from_disk) {
        counters_.disk_hits.fetch_add(1, std::memory_order_relaxed);
      } else {
        counters_.compiles.fetch_add(1, std::memory_order_relaxed);
        counters_.compile_us.fetch_add(static_cast<std::uint64_t>(std::max(0.0, provided.module.compile_ms) * 1000),
                                       std::memory_order_relaxed);
      }
      if (!(provided.module.target == target_) || provided.module.module != source.module)
        throw_error("the module provider returned '" + provided.module.module + "' for " + provided.module.target.name() +
                    ", expected '" + source.module + "' for " + target_name_);

      CUresult result = CUDA_SUCCESS;
      std::string jit_log;
      load_once(source, provided, outcome, result, jit_log);
      if (result == CUDA_SUCCESS) return outcome;

      outcome.reason = driver::driver_error_message(api_, result, "cuModuleLoadDataEx");
      if (!jit_log.empty()) outcome.reason += ": " + jit_log;
      if (!is_bad_image(result)) return outcome;
      counters_.load_refused.fetch_add(1, std::memory_order_relaxed);
      if (provider_.evict) provider_.evict(source, provided.module);
      // Why: only a binary from disk is worth compiling again; a fresh compile would come out the same.
      if (attempt > 0 || !provided.from_disk) return outcome;
      logger().info("device {}: the driver refused the cached binary of '{}' ({}); evicted, compiling again",
                    device(), source.module, outcome.reason);
    }
  } catch (const std::exception& error) {
    outcome.reason = describe(error);
  } catch (...) {
    outcome.reason = "the module provider threw an exception that is not a std::exception";
  }
  outcome.module = nullptr;
  return outcome;
}

// One cuModuleLoadDataEx and the lookup of every entry, in the device's context. On a load failure
// `result` says why; a failed lookup unloads the module and throws.
void ModuleCache::Impl::load_once(const KernelSource& source, const ProvidedModule& provided, Outcome& outcome,
                                  CUresult& result, std::string& jit_log) {
  const CompiledModule& binary = provided.module;
  const void* image = nullptr;
  if (binary.target.kind == OutputKind::cubin) {
    if (binary.cubin.empty()) throw_error("the module provider returned no CUBIN for '" + source.module + "'");
    image = binary.cubin.data();
  } else {
    if (binary.ptx.empty()) throw_error("the module provider returned no PTX for '" + source.module + "'");
    image = binary.ptx.c_str();
  }

  std::array<char, 4096> log{};
  std::array<CUjit_option, 2> options{CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  // Why: the driver takes scalar option values in the pointer slots themselves.
  std::array<void*, 2> values{log.data(), reinterpret_cast<void*>(log.size())};
  std::vector<CUfunction> functions(source.entries.size(), nullptr);

  driver::ScopedCurrent current(context_);
  CUmodule module = nullptr;
  result = api_.cuModuleLoadDataEx(&module, image, static_cast<unsigned>(options.size()), options.data(), values.data());
  if (result != CUDA_SUCCESS) {
    log.back() = '\0';
    jit_log = log.data();
    return;
  }
  for (std::size_t i = 0; i < source.entries.size(); ++i) {
    const CUresult found = api_.cuModuleGetFunction(&functions[i], module, source.entries[i].c_str());
    if (found != CUDA_SUCCESS) {
      unload(source.module, module);
      throw_error(driver::driver_error_message(api_, found, "cuModuleGetFunction") + " for entry '" +
                      source.entries[i] + "'",
                  ErrorContext{"cuModuleGetFunction", source.module, target_name_, {}, {}});
    }
  }
  outcome.module = module;
  outcome.functions = std::move(functions);
}

void ModuleCache::Impl::publish(Slot& slot, const KernelSource& source, Outcome&& outcome) {
  if (outcome.module != nullptr) {
    try {
      slot.first_record = records_.size();
      slot.kernels.reserve(source.entries.size());
      for (std::size_t i = 0; i < source.entries.size(); ++i) {
        records_.push_back(Record{source.module, source.entries[i], outcome.functions[i]});
        const std::uint64_t index = records_.size() - 1;
        slot.kernels.emplace_back(records_.back().entry, KernelHandle{id_ << ID_SHIFT | (index + 1)});
      }
      slot.module = outcome.module;
      slot.state = State::loaded;
      logger().debug("device {}: loaded '{}' for {}", device(), source.module, target_name_);
      return;
    } catch (const std::exception& error) {
      for (std::size_t i = slot.first_record; i < records_.size(); ++i) records_[i].function = nullptr;
      slot.kernels.clear();
      unload(source.module, outcome.module);
      outcome.reason = error.what();
    }
  }
  slot.state = State::failed;
  counters_.failures.fetch_add(1, std::memory_order_relaxed);
  logger().warn("device {}: module '{}' is unavailable for {}: {}", device(), source.module, target_name_,
                outcome.reason);
}

void ModuleCache::Impl::unload(std::string_view name, CUmodule module) noexcept {
  try {
    driver::ScopedCurrent current(context_);
    driver::check(api_, api_.cuModuleUnload(module), "cuModuleUnload");
  } catch (const std::exception& error) {
    logger().warn("device {}: unloading '{}': {}", device(), name, error.what());
  }
}

LoadedKernel ModuleCache::Impl::resolve(KernelHandle handle) const {
  const ErrorContext context{"launch", {}, target_name_, {}, {}};
  if (!handle.loaded())
    throw_error("kernel handle is 0: the kernel is unavailable on device " + std::to_string(device()), context);
  const std::uint64_t index = (handle.raw & INDEX_MASK) - 1;
  std::shared_lock lock(mutex_);
  if (handle.raw >> ID_SHIFT != id_ || index >= records_.size())
    throw_error("handle was not returned by this backend (device " + std::to_string(device()) + ")", context);
  const Record& record = records_[index];
  if (record.function == nullptr)
    throw_error("handle of '" + record.entry + "' in module '" + record.module + "' on device " +
                    std::to_string(device()) + " is stale: its module was unloaded by clear()",
                ErrorContext{"launch", record.module, target_name_, {}, {}});
  return LoadedKernel{record.function, record.module, record.entry};
}

void ModuleCache::Impl::clear() noexcept {
  std::unique_lock lock(mutex_);
  for (auto& slot : slots_) {
    if (slot->state == State::pending) continue;
    if (slot->state == State::loaded) {
      for (std::size_t i = 0; i < slot->kernels.size(); ++i) records_[slot->first_record + i].function = nullptr;
      unload(slot->source.module, slot->module);
    }
    slot.reset();
  }
  slots_.erase(std::remove(slots_.begin(), slots_.end(), nullptr), slots_.end());
}

ModuleCacheCounters ModuleCache::Impl::counters() const noexcept {
  ModuleCacheCounters out;
  out.memory_hits = counters_.memory_hits.load(std::memory_order_relaxed);
  out.lock_waits = counters_.lock_waits.load(std::memory_order_relaxed);
  out.disk_hits = counters_.disk_hits.load(std::memory_order_relaxed);
  out.compiles = counters_.compiles.load(std::memory_order_relaxed);
  out.compile_ms = static_cast<double>(counters_.compile_us.load(std::memory_order_relaxed)) / 1000.0;
  out.load_refused = counters_.load_refused.load(std::memory_order_relaxed);
  out.failures = counters_.failures.load(std::memory_order_relaxed);
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

}  // namespace kiln

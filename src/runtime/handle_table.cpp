#include "runtime/handle_table.hpp"

#include <atomic>
#include <mutex>

#include "kiln/error.hpp"
#include "runtime/module_loader.hpp"

namespace kiln {

namespace {

constexpr int ID_SHIFT = 32;
constexpr std::uint64_t INDEX_MASK = (std::uint64_t{1} << ID_SHIFT) - 1;

std::uint64_t next_table_id() {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

HandleTable::HandleTable(int device, std::string target_name)
    : device_(device), target_name_(std::move(target_name)), id_(next_table_id()) {}

std::uint64_t HandleTable::index_of(KernelHandle handle) const noexcept { return (handle.raw & INDEX_MASK) - 1; }

std::vector<KernelHandle> HandleTable::add(const std::shared_ptr<const driver::LoadedModule>& module,
                                           const std::vector<std::string>& entries) {
  std::vector<KernelHandle> handles;
  handles.reserve(entries.size());
  std::unique_lock lock(mutex_);
  try {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      records_.push_back(Record{module->name(), entries[i], module->functions()[i], module});
      handles.push_back(KernelHandle{id_ << ID_SHIFT | records_.size()});
    }
  } catch (...) {
    // Why: the caller never sees these handles, so records kept here would hold the module loaded
    // until the table dies; no handle of them exists, so their indices can be given out again.
    for (std::size_t added = handles.size(); added > 0; --added) records_.pop_back();
    throw;
  }
  return handles;
}

void HandleTable::retire(const std::vector<KernelHandle>& handles) noexcept {
  // Why outside the lock: dropping the last share unloads the module, a driver call that must not
  // hold up resolve() on other threads. One share suffices: the handles are one module's.
  std::shared_ptr<const driver::LoadedModule> released;
  std::unique_lock lock(mutex_);
  for (const KernelHandle handle : handles) {
    Record& record = records_[index_of(handle)];
    record.function = nullptr;
    if (record.owner) released = std::move(record.owner);
  }
  lock.unlock();
}

LoadedKernel HandleTable::resolve(KernelHandle handle) const {
  // Why built only on a refusal: resolve runs on every launch, and the context's strings are
  // a measurable part of a launch's host time.
  const auto context = [this] { return ErrorContext{"launch", {}, target_name_, {}, {}}; };
  if (!handle.loaded())
    throw_error("kernel handle is 0: the kernel is unavailable on device " + std::to_string(device_), context());
  const std::uint64_t index = index_of(handle);
  std::shared_lock lock(mutex_);
  if (handle.raw >> ID_SHIFT != id_ || index >= records_.size())
    throw_error("handle was not returned by this backend (device " + std::to_string(device_) + ")", context());
  const Record& record = records_[index];
  if (record.function == nullptr)
    throw_error("handle of '" + record.entry + "' in module '" + record.module + "' on device " +
                    std::to_string(device_) + " is stale: its module was unloaded by clear()",
                ErrorContext{"launch", record.module, target_name_, {}, {}});
  return LoadedKernel{record.function, record.module, record.entry, record.owner};
}

}  // namespace kiln

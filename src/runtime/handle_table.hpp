#pragma once
/// @file
/// The kernel handles one memory cache hands out, and what each stands for.
///
/// A handle is (table id << 32) | (record index + 1): nonzero, never reused within a process
/// (ids are never reused, record indices only grow), and checkable without dereferencing anything.
/// Records are never erased, so a handle whose module was retired is told apart from a foreign one.

#include <cstdint>
#include <deque>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/kernel_handle.hpp"

namespace kiln {

namespace driver {
class LoadedModule;
}

/// What a handle stands for, and a share of its module: while this value lives, the module stays
/// loaded and `function` valid, even if clear() retires the handle meanwhile.
struct LoadedKernel {
  void* function = nullptr;  ///< the CUfunction
  std::string_view module;   ///< valid as long as the table
  std::string_view entry;    ///< valid as long as the table
  std::shared_ptr<const driver::LoadedModule> owner;
};

/// Every member is safe to call from many threads.
class HandleTable {
 public:
  /// `device` and `target_name` only word the errors.
  HandleTable(int device, std::string target_name);

  /// One handle per function of `module`, for the entries of the same index. The table shares
  /// ownership of `module` until the handles are retired. If it throws (out of memory), the
  /// table is as it was: no record added, no share of `module` kept.
  std::vector<KernelHandle> add(const std::shared_ptr<const driver::LoadedModule>& module,
                                const std::vector<std::string>& entries);

  /// `handles` (all of one module, as add returned them) go stale: resolve refuses them from now
  /// on, and the table lets go of their module
  /// (which unloads once no LoadedKernel of it is left).
  void retire(const std::vector<KernelHandle>& handles) noexcept;

  /// The kernel behind `handle`. Throws kiln::Error (call "launch") for 0, for a handle this table
  /// did not return ("handle was not returned by this backend (device N)"), and for a retired one.
  LoadedKernel resolve(KernelHandle handle) const;

 private:
  struct Record {
    std::string module;
    std::string entry;
    void* function = nullptr;  ///< null once retired
    std::shared_ptr<const driver::LoadedModule> owner;  ///< null once retired
  };

  std::uint64_t index_of(KernelHandle handle) const noexcept;

  const int device_;
  const std::string target_name_;
  const std::uint64_t id_;
  mutable std::shared_mutex mutex_;
  std::deque<Record> records_;
};

}  // namespace kiln

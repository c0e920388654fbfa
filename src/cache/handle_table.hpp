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

/// What a handle stands for.
struct LoadedKernel {
  void* function = nullptr;  ///< the CUfunction
  std::string_view module;   ///< valid as long as the table
  std::string_view entry;    ///< valid as long as the table
};

/// Every member is safe to call from many threads.
class HandleTable {
 public:
  /// `device` and `target_name` only word the errors.
  HandleTable(int device, std::string target_name);

  /// One handle per function of `module`, for the entries of the same index.
  std::vector<KernelHandle> add(const driver::LoadedModule& module, const std::vector<std::string>& entries);

  /// `handles` go stale: resolve refuses them from now on.
  void retire(const std::vector<KernelHandle>& handles) noexcept;

  /// The kernel behind `handle`. Throws kiln::Error (call "launch") for 0, for a handle this table
  /// did not return ("handle was not returned by this backend (device N)"), and for a retired one.
  LoadedKernel resolve(KernelHandle handle) const;

 private:
  struct Record {
    std::string module;
    std::string entry;
    void* function = nullptr;  ///< null once retired
  };

  std::uint64_t index_of(KernelHandle handle) const noexcept;

  const int device_;
  const std::string target_name_;
  const std::uint64_t id_;
  mutable std::shared_mutex mutex_;
  std::deque<Record> records_;
};

}  // namespace kiln

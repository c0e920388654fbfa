#pragma once
/// @file
/// Device primary contexts: the one context per device that the CUDA runtime (and so PyTorch) also
/// uses, so kiln's modules and launches live in the same context as the caller's memory.

#include "driver/driver_api.hpp"

namespace kiln::driver {

/// A retained primary context (cuDevicePrimaryCtxRetain), released on destruction. Owns one
/// reference; not copyable. `api` must outlive it.
class PrimaryContext {
 public:
  /// Throws kiln::Error naming the driver call that failed.
  PrimaryContext(const DriverApi& api, int ordinal);
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;

  const DriverApi& api() const noexcept { return api_; }
  int ordinal() const noexcept { return ordinal_; }
  CUcontext get() const noexcept { return context_; }

 private:
  const DriverApi& api_;
  int ordinal_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

/// Whether device `ordinal`'s primary context is already active (retained by anyone in this
/// process: kiln, the CUDA runtime, PyTorch), so retaining it again costs next to nothing. Throws
/// kiln::Error naming the driver call that failed.
bool primary_context_active(const DriverApi& api, int ordinal);

/// Makes a context current on this thread for one scope and restores the caller's afterwards.
/// When the context is already current it does nothing (one cuCtxGetCurrent), so a caller that
/// set it up, as PyTorch does, pays no push/pop.
class ScopedCurrent {
 public:
  /// Throws kiln::Error naming the driver call that failed.
  explicit ScopedCurrent(const PrimaryContext& context);
  ~ScopedCurrent();
  ScopedCurrent(const ScopedCurrent&) = delete;
  ScopedCurrent& operator=(const ScopedCurrent&) = delete;

 private:
  const DriverApi& api_;
  bool pushed_ = false;
};

}  // namespace kiln::driver

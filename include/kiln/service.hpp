#pragma once
/// @file
/// kiln assembled: what embedders create. A Service is one device: the process disk cache in front
/// of NVRTC, feeding that device's backend (primary context, target, loaded modules), and the FP8
/// quantizer resolved on it.
///
/// Services of one process share one disk cache (the folder is shared by processes anyway, and
/// sharing the object keeps this process's disk counters in one place). Every member is safe to
/// call from many threads.

#include <memory>
#include <string>

#include "kiln/counters.hpp"
#include "kiln/error.hpp"
#include "kiln/export.hpp"
#include "kiln/gpu_backend.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/ops/group_quant.hpp"

namespace kiln {

class KILN_API Service {
 public:
  /// Device `ordinal` of the process driver, with the process disk cache and a Compiler reading
  /// KILN_LINEINFO. Without a driver or device the service exists and every handle is 0
  /// (`unavailable_reason()` says why). Throws kiln::Error on a negative ordinal or one past the
  /// device count, and on a bad KILN_ARCH.
  explicit Service(int ordinal = 0);
  /// Unloads this device's modules and releases its primary context.
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  /// The device, for launches (`ops::Fp8ActQuant::launch(service.gpu(), ...)`).
  GpuBackend& gpu() noexcept;
  /// Handles can be nonzero: the driver, the device and its target are usable.
  bool available() const noexcept;
  /// Why not available (no driver, a driver error, no target); empty when it is.
  const std::string& unavailable_reason() const noexcept;
  /// The quantizer on this device, resolved on first use (compiles or loads both modules) and
  /// resolved again after the device's modules were cleared or a load failed for a passing reason
  /// (out of memory), so its handles are never stale and a transient failure is not forever. A
  /// permanent failure (a compile error) is remembered: that kernel's handle stays 0.
  ops::Fp8ActQuant fp8_act_quant();
  /// A variant of the quantizer family on this device, resolved on its first use (only the kernels
  /// its calls can run here are compiled or loaded: GroupQuant::resolve) and again, as
  /// fp8_act_quant(), after a clear() or a transient failure. Throws kiln::Error for an impossible
  /// variant, naming the parameter and the allowed values.
  ops::GroupQuant group_quant(const ops::QuantVariant& variant);
  ServiceCounters counters() const;

 protected:
  // Why protected: kiln's own tools and tests build a Service from explicit parts and reach them
  // (InternalService, src/service_internal.hpp); embedders need neither.
  struct Parts;
  explicit Service(std::unique_ptr<Parts> parts);
  Parts& parts() const noexcept { return *parts_; }

 private:
  std::unique_ptr<Parts> parts_;
};

}  // namespace kiln

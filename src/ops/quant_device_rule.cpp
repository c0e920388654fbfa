#include "ops/quant_device_rule.hpp"

#include <fmt/format.h>

#include "kiln/gpu_backend.hpp"

namespace kiln::ops {

QuantDeviceFigures figures_of(const DeviceInfo& device) {
  return QuantDeviceFigures{device.sm_count, device.clock_khz, device.memory_clock_khz, device.memory_bus_bits};
}

double shared_kernel_bytes_per_second(const QuantDeviceFigures& figures) {
  return static_cast<double>(figures.sm_count) * figures.clock_khz * 1e3 * SHARED_KERNEL_BYTES_PER_SM_CYCLE;
}

double memory_bytes_per_second(const QuantDeviceFigures& figures) {
  return 2.0 * figures.memory_clock_khz * 1e3 * figures.memory_bus_bits / 8;
}

bool quant_prefers_shared(const QuantDeviceFigures& figures) {
  const double memory = memory_bytes_per_second(figures);
  const double shared = shared_kernel_bytes_per_second(figures);
  return memory > 0 && shared > 0 && shared >= SHARED_KERNEL_MIN_RATE_OVER_MEMORY * memory;
}

std::string quant_device_rule_text(const QuantDeviceFigures& figures) {
  const double memory = memory_bytes_per_second(figures);
  const double shared = shared_kernel_bytes_per_second(figures);
  if (memory <= 0 || shared <= 0)
    return "the device's SM count, clock, memory clock or bus width is unknown: the family kernel";
  return fmt::format("shared kernel {:.0f} GB/s ({} SMs x {} MHz), memory {:.0f} GB/s: {:.2f}x, {} {:.2f}x",
                     shared / 1e9, figures.sm_count, figures.clock_khz / 1000, memory / 1e9, shared / memory,
                     quant_prefers_shared(figures) ? "at least" : "below", SHARED_KERNEL_MIN_RATE_OVER_MEMORY);
}

const std::vector<PublishedGpu>& published_gpus() {
  // Published figures, in the driver's units (memory clock: half the data rate). B200, RTX 5090 and
  // GB10 are unmeasured by kiln; their memory clocks are derived from the published bandwidth.
  static const std::vector<PublishedGpu> gpus{
      {"a100", {108, 1410000, 1593000, 5120}},   // A100 SXM4 80GB: 2039 GB/s
      {"l40s", {142, 2520000, 9001000, 384}},    // 864 GB/s
      {"rtx4090", {128, 2520000, 10501000, 384}},  // 1008 GB/s
      {"h100", {132, 1980000, 2619000, 5120}},   // H100 SXM5 80GB: 3352 GB/s
      {"h200", {132, 1980000, 3201000, 6144}},   // 4917 GB/s
      {"b200", {148, 1965000, 3906000, 8192}},   // 8000 GB/s
      {"rtx5090", {170, 2407000, 14000000, 512}},  // 1792 GB/s
      {"gb10", {48, 2418000, 4266000, 256}},     // 273 GB/s LPDDR5x
  };
  return gpus;
}

}  // namespace kiln::ops

#pragma once
/// @file
/// Which of the seed variant's two non-Hopper kernels is faster on a device, from what the driver
/// reports of it: the shared kernel (one 128-thread CTA per group) or the family kernel (32 groups
/// per 256-thread CTA). docs/performance.md, "The shared kernel and the family kernel", has the
/// measurements behind it.
///
/// The shared kernel is bound by how fast the SMs start CTAs, not by memory: on the H100 and the
/// H200 (same SM count and clock) it moved the same ~640 GB/s at large shapes although their
/// memories differ by 40%. That rate scales with SMs x clock. The family kernel streams at the
/// memory's speed. So the shared kernel can only be the faster where its CTA-start rate outruns
/// the memory.

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {
struct DeviceInfo;
}

namespace kiln::ops {

/// What the rule reads of a device; 0 is unknown.
struct QuantDeviceFigures {
  std::uint32_t sm_count = 0;
  std::uint32_t clock_khz = 0;         ///< SM clock
  std::uint32_t memory_clock_khz = 0;  ///< as the driver reports it (the DDR data rate is twice it)
  std::uint32_t memory_bus_bits = 0;
};

QuantDeviceFigures figures_of(const DeviceInfo& device);

/// Bytes (input read, codes and scales written) per SM per SM-clock cycle that the shared kernel
/// moves when CTA starts bound it: 640 GB/s on 132 SMs at 1.98 GHz (H100 and H200 alike).
inline constexpr double SHARED_KERNEL_BYTES_PER_SM_CYCLE = 2.45;
/// The shared kernel runs only where its CTA-start rate is at least this multiple of the memory
/// bandwidth. Why a margin above 1: at 1 both kernels reach the memory's speed at large shapes and
/// tie below it, and where the rule is unmeasured it errs toward the family kernel.
inline constexpr double SHARED_KERNEL_MIN_RATE_OVER_MEMORY = 1.25;

/// SMs x clock x SHARED_KERNEL_BYTES_PER_SM_CYCLE, bytes per second; 0 when a figure is unknown.
double shared_kernel_bytes_per_second(const QuantDeviceFigures& figures);
/// 2 x memory clock x bus width in bytes (double data rate), bytes per second; 0 when unknown.
double memory_bytes_per_second(const QuantDeviceFigures& figures);
/// The rule: true when the shared kernel's CTA-start rate is at least
/// SHARED_KERNEL_MIN_RATE_OVER_MEMORY times the memory bandwidth; false (the family kernel) when
/// it is not, or when a figure is unknown. Pure.
bool quant_prefers_shared(const QuantDeviceFigures& figures);
/// The rule's numbers in words: "shared kernel 640 GB/s (132 SMs x 1980 MHz), memory 3352 GB/s:
/// 0.19x, below 1.25x".
std::string quant_device_rule_text(const QuantDeviceFigures& figures);

/// A GPU by its published figures, for `kiln pick --gpu` and the rule's tests.
struct PublishedGpu {
  std::string name;  ///< lower case, as `--gpu` takes it: a100, l40s, rtx4090, h100, h200, b200, rtx5090, gb10
  QuantDeviceFigures figures;
};
const std::vector<PublishedGpu>& published_gpus();

}  // namespace kiln::ops

#pragma once
// One GPU as the benchmark uses it: kiln's Service on device 0 with both quantizer handles, the
// primary context current on the calling thread (as PyTorch keeps it), one stream, CUDA events,
// and the benchmark's own module loaded through a ModuleCache of its own.
//
// Not thread-safe: one benchmark thread owns it.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <string_view>
#include <vector>

#include "runtime/module_cache.hpp"
#include "device_buffer.hpp"
#include "runtime/cuda_backend.hpp"
#include "driver/driver_api.hpp"
#include "driver/primary_context.hpp"
#include "kiln/service.hpp"
#include "service_internal.hpp"

namespace kiln::bench {

class GpuSession {
 public:
  /// Throws kiln::Error when device 0 is unavailable or the shared quantizer does not load; what
  /// was acquired by then is released.
  GpuSession();
  ~GpuSession();
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  InternalService& service() noexcept { return service_; }
  CudaBackend& backend() noexcept { return service_.backend(); }
  const ops::Fp8ActQuant& quant() const noexcept { return quant_; }
  /// The default variant through the one pick (what kiln_quant runs).
  const ops::GroupQuant& default_quant() const noexcept { return default_quant_; }
  const driver::DriverApi& api() const noexcept { return context_->api(); }
  const driver::PrimaryContext& context() const noexcept { return *context_; }
  CUstream stream() const noexcept { return stream_; }
  std::size_t l2_bytes() const noexcept { return l2_bytes_; }

  /// The function `entry` of `module` (embedded, or the benchmark's BENCH_MODULE) in the
  /// benchmark's own copy of that module: the same binary kiln loads, for raw cuLaunchKernel.
  CUfunction function(std::string_view module, std::string_view entry);

  /// cuLaunchKernel on stream(), no shared memory; throws on failure.
  void launch_raw(CUfunction function, Dim3 grid, Dim3 block, void** args);
  /// Holds the stream `us` microseconds (kiln_bench_spin), so what is queued next starts back to back.
  void spin_us(double us);
  /// Random bf16 into `elements` values at `x` (kiln_bench_fill), on stream().
  void fill_bf16(void* x, std::size_t elements, std::uint32_t seed);
  /// Overwrites a buffer of twice the L2 on stream(), so nothing timed next finds its data cached.
  void flush_l2();
  void synchronize();

  /// Event `index` of a pool that grows on demand; valid as long as the session.
  CUevent event(std::size_t index);
  void record(CUevent event);
  /// Milliseconds between two recorded events (both must have completed).
  float elapsed_ms(CUevent start, CUevent stop);

 private:
  /// Everything the constructor acquired, in reverse; safe on a half-built session.
  void release() noexcept;

  InternalService service_;
  std::unique_ptr<driver::PrimaryContext> context_;
  ops::Fp8ActQuant quant_;
  ops::GroupQuant default_quant_;
  bool pushed_ = false;
  CUstream stream_ = nullptr;
  std::size_t l2_bytes_ = 0;
  std::unique_ptr<ModuleCache> modules_;
  CUfunction spin_ = nullptr;
  CUfunction fill_ = nullptr;
  std::unique_ptr<test::DeviceBuffer> scratch_;
  std::vector<CUevent> events_;
};

/// The inputs and outputs of one (m, k), in as many copies as it takes for the copies together to
/// span twice the L2 (one copy when one is already that large). `next()` rotates through them, so
/// a copy comes round again only after at least 2x L2 of other data has been touched. Inputs are
/// random bf16; copies are 256-byte aligned, as the twin needs (x 16, q 8).
class ShapeBuffers {
 public:
  ShapeBuffers(GpuSession& gpu, std::uint32_t m, std::uint32_t k);

  struct Slot {
    const void* x;
    void* q;
    float* scales;
  };
  Slot next();
  std::size_t copies() const noexcept { return copies_; }
  std::uint32_t m() const noexcept { return m_; }
  std::uint32_t k() const noexcept { return k_; }

 private:
  std::uint32_t m_, k_;
  std::size_t x_stride_, q_stride_, s_stride_, copies_;
  std::size_t cursor_ = 0;
  test::DeviceBuffer x_, q_, s_;
};

/// One quantizer launch through kiln (`backend().launch`) with `handle`, the grid of its own arm
/// (`fp8_quant_grid(twin, m, k)`) and block 128, on `stream`, with `options` (PDL).
void launch_quant(GpuSession& gpu, KernelHandle handle, bool twin, std::uint32_t m, std::uint32_t k,
                  const ShapeBuffers::Slot& slot, CUstream stream, LaunchOptions options = {});

/// Median µs of one launch of `arm`, over `launches` launches each between its own pair of events,
/// all queued behind a spin so they run back to back and host latency stays out. Warm-up launches
/// are not timed. Inputs rotate through `buffers`.
double time_arm_us(GpuSession& gpu, ShapeBuffers& buffers, KernelHandle handle, bool twin, int launches);
/// The same timing for any launch: `launch_once` queues one launch on gpu.stream() (rotating its
/// own inputs); `what` names it in the host-latency warning.
double time_launches_us(GpuSession& gpu, const std::function<void()>& launch_once, int launches, const std::string& what);
/// Median µs of a device-to-device copy that moves `moved` bytes (read plus written), timed as
/// time_launches_us and rotated over 2x L2 the same way: the ceiling at that size, which launch,
/// ramp-up and drain put below the 4 GiB copy's.
double copy_us(GpuSession& gpu, double moved, int launches);
/// One launch of the benchmark's empty kernel `entry` (BENCH_EMPTY or BENCH_EMPTY_PDL; grid 1,
/// block 128, the quantizer's first four arguments, all null) on `stream`, raw; throws on failure.
void launch_empty(GpuSession& gpu, CUstream stream, std::string_view entry, bool dependent);
/// Median µs of the empty kernel, timed as time_launches_us: the floor under every arm's time.
double empty_us(GpuSession& gpu, int launches);

}  // namespace kiln::bench

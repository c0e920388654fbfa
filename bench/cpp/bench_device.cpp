#include "bench_device.hpp"

#include <algorithm>
#include <cmath>

#include "base/log.hpp"
#include "bench_kernels.hpp"
#include "bench_stats.hpp"
#include "runtime/module_provider.hpp"
#include "driver/driver_check.hpp"
#include "driver/kernel_launch.hpp"
#include "jit/compiler.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"

namespace kiln::bench {

namespace {

constexpr std::size_t ALIGN = 256;
constexpr int WARMUP_LAUNCHES = 3;
// Why 20 µs: the host needs a few µs per launch and event record; the spin must outlast queuing
// all of them, else the first launches would wait for the host and host latency would be timed.
constexpr double SPIN_US_PER_LAUNCH = 20;
// Why batches of 10 between one event pair: an event pair around each launch costs ~4 us of GPU
// time on the H200 (a tiny shape timed 4.4 us that way; an empty kernel in a CUDA graph takes
// 0.5 us), which hid a third of the kernel time at 50 us shapes. Ten back-to-back launches per pair
// leave only the gap between launches, which a caller's stream also pays.
constexpr int ARM_BATCH = 10;

std::size_t aligned(std::size_t bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

const KernelSource* bench_or_embedded(std::string_view module) {
  if (module == BENCH_MODULE) return &bench_kernel_source();
  return find_module(module);
}

}  // namespace

GpuSession::GpuSession() : service_(0) {
  if (!backend().available()) throw_error("GPU 0 is unavailable: " + backend().unavailable_reason());
  // Why here: these entries are optional in the driver table (an old driver lacks, e.g.,
  // cuEventElapsedTime_v2, new in CUDA 12.8); the benchmark should stop with the missing names
  // rather than call a null entry later. The list is what bench/cpp and its DeviceBuffers call.
  driver::require_entries(driver::driver_api(),
                          {"cuCtxSynchronize", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2",
                           "cuMemcpyDtoDAsync_v2", "cuMemsetD8_v2", "cuStreamCreate", "cuStreamDestroy_v2",
                           "cuStreamSynchronize", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
                           "cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy",
                           "cuEventCreate", "cuEventDestroy_v2", "cuEventRecord",
                           "cuEventElapsedTime_v2"},
                          "kiln-bench");
  quant_ = service_.fp8_act_quant();
  if (!quant_.shared().loaded())
    throw_error("the shared quantizer kernel did not load on " + backend().device().name + " (the log says why)");
  default_quant_ = service_.group_quant(ops::QuantVariant{});
  try {
    context_ = std::make_unique<driver::PrimaryContext>(driver::driver_api(), 0);
    driver::check(api(), api().cuCtxPushCurrent_v2(context_->get()), "cuCtxPushCurrent");
    pushed_ = true;
    driver::check(api(), api().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CUdevice device = 0;
    driver::check(api(), api().cuDeviceGet(&device, 0), "cuDeviceGet");
    int l2 = 0;
    driver::check(api(), api().cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device),
                  "cuDeviceGetAttribute(L2_CACHE_SIZE)");
    l2_bytes_ = static_cast<std::size_t>(std::max(l2, 1 << 20));
    modules_ = std::make_unique<ModuleCache>(*context_, *backend().target(),
                                             make_module_provider(service_.disk(), Compiler()), bench_or_embedded);
    spin_ = function(BENCH_MODULE, BENCH_SPIN);
    fill_ = function(BENCH_MODULE, BENCH_FILL);
    scratch_ = std::make_unique<test::DeviceBuffer>(*context_, 2 * l2_bytes_);
  } catch (...) {
    release();
    throw;
  }
}

GpuSession::~GpuSession() { release(); }

void GpuSession::release() noexcept {
  if (!context_) return;
  // Why this order: nothing may still run when the buffers go, and the stream and events belong to
  // the context popped last. Results are ignored: there is no one to tell.
  if (stream_ != nullptr) api().cuStreamSynchronize(stream_);
  scratch_.reset();
  modules_.reset();
  for (CUevent event : events_) api().cuEventDestroy_v2(event);
  events_.clear();
  if (stream_ != nullptr) api().cuStreamDestroy_v2(stream_);
  stream_ = nullptr;
  CUcontext popped = nullptr;
  if (pushed_) api().cuCtxPopCurrent_v2(&popped);
  pushed_ = false;
  context_.reset();
}

CUfunction GpuSession::function(std::string_view module, std::string_view entry) {
  const KernelHandle handle = modules_->kernel(module, entry);
  if (!handle.loaded())
    throw_error("the benchmark could not load '" + std::string(entry) + "' of module '" + std::string(module) +
                "' (the log says why)");
  return static_cast<CUfunction>(modules_->resolve(handle).function);
}

void GpuSession::launch_raw(CUfunction function, Dim3 grid, Dim3 block, void** args) {
  driver::check(
      api(),
      api().cuLaunchKernel(function, grid.x, grid.y, grid.z, block.x, block.y, block.z, 0, stream_, args, nullptr),
      "cuLaunchKernel");
}

void GpuSession::spin_us(double us) {
  unsigned long long ns = static_cast<unsigned long long>(us * 1e3);
  void* args[] = {&ns};
  launch_raw(spin_, Dim3{1, 1, 1}, Dim3{1, 1, 1}, args);
}

void GpuSession::fill_bf16(void* x, std::size_t elements, std::uint32_t seed) {
  unsigned long long n = elements;
  void* args[] = {&x, &n, &seed};
  const std::size_t blocks =
      std::min<std::size_t>((elements + 255) / 256, std::size_t{backend().device().sm_count} * 16);
  launch_raw(fill_, Dim3{static_cast<std::uint32_t>(std::max<std::size_t>(blocks, 1)), 1, 1}, Dim3{256, 1, 1}, args);
}

void GpuSession::flush_l2() { fill_bf16(scratch_->get(), scratch_->bytes() / 2, 0x5eed); }

void GpuSession::synchronize() { driver::check(api(), api().cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

CUevent GpuSession::event(std::size_t index) {
  while (events_.size() <= index) {
    CUevent created = nullptr;
    driver::check(api(), api().cuEventCreate(&created, CU_EVENT_DEFAULT), "cuEventCreate");
    events_.push_back(created);
  }
  return events_[index];
}

void GpuSession::record(CUevent event) { driver::check(api(), api().cuEventRecord(event, stream_), "cuEventRecord"); }

float GpuSession::elapsed_ms(CUevent start, CUevent stop) {
  float ms = 0;
  driver::check(api(), api().cuEventElapsedTime_v2(&ms, start, stop), "cuEventElapsedTime");
  return ms;
}

namespace {

std::size_t copies_for(std::size_t footprint, std::size_t l2) {
  return std::max<std::size_t>(1, (2 * l2 + footprint - 1) / footprint);
}

}  // namespace

ShapeBuffers::ShapeBuffers(GpuSession& gpu, std::uint32_t m, std::uint32_t k)
    : m_(m),
      k_(k),
      x_stride_(aligned(std::size_t{m} * k * 2)),
      q_stride_(aligned(std::size_t{m} * k)),
      s_stride_(aligned(std::size_t{m} * (k / ops::FP8_QUANT_GROUP) * 4)),
      copies_(copies_for(x_stride_ + q_stride_ + s_stride_, gpu.l2_bytes())),
      x_(gpu.context(), x_stride_ * copies_),
      q_(gpu.context(), q_stride_ * copies_),
      s_(gpu.context(), s_stride_ * copies_) {
  gpu.fill_bf16(x_.get(), x_.bytes() / 2, m * 2654435761u ^ k);
  gpu.flush_l2();
  gpu.synchronize();
}

ShapeBuffers::Slot ShapeBuffers::next() {
  const std::size_t i = cursor_++ % copies_;
  return Slot{static_cast<const char*>(x_.get()) + i * x_stride_, static_cast<char*>(q_.get()) + i * q_stride_,
              reinterpret_cast<float*>(static_cast<char*>(s_.get()) + i * s_stride_)};
}

void launch_quant(GpuSession& gpu, KernelHandle handle, bool twin, std::uint32_t m, std::uint32_t k,
                  const ShapeBuffers::Slot& slot, CUstream stream, LaunchOptions options) {
  const auto grid = ops::fp8_quant_grid(twin, m, k);
  const void* x = slot.x;
  void* q = slot.q;
  float* scales = slot.scales;
  std::uint32_t k_arg = k;
  std::uint32_t m_arg = m;  // the twin's fifth argument; the shared kernel declares four
  void* args[] = {&x, &q, &scales, &k_arg, &m_arg};
  gpu.backend().launch(handle, Dim3{grid[0], grid[1], grid[2]}, Dim3{ops::FP8_QUANT_GROUP, 1, 1}, 0, stream, args,
                       options);
}

double time_arm_us(GpuSession& gpu, ShapeBuffers& buffers, KernelHandle handle, bool twin, int launches) {
  return time_launches_us(
      gpu, [&] { launch_quant(gpu, handle, twin, buffers.m(), buffers.k(), buffers.next(), gpu.stream()); }, launches,
      "M=" + std::to_string(buffers.m()) + " K=" + std::to_string(buffers.k()));
}

double time_launches_us(GpuSession& gpu, const std::function<void()>& launch_once, int launches, const std::string& what) {
  for (int i = 0; i < WARMUP_LAUNCHES; ++i) launch_once();
  const int batches = std::max(1, launches / ARM_BATCH);
  gpu.event(2 * static_cast<std::size_t>(batches));  // create the pool before the timed queue
  gpu.synchronize();
  const double spin_us = std::max(200.0, SPIN_US_PER_LAUNCH * launches);
  gpu.spin_us(spin_us);
  const std::int64_t queue_start = now_ns();
  for (int b = 0; b < batches; ++b) {
    gpu.record(gpu.event(2 * static_cast<std::size_t>(b)));
    for (int i = 0; i < ARM_BATCH; ++i) launch_once();
    gpu.record(gpu.event(2 * static_cast<std::size_t>(b) + 1));
  }
  const double queue_us = static_cast<double>(now_ns() - queue_start) / 1e3;
  if (queue_us > spin_us)
    logger().warn(
        "bench: queuing {} launches took {:.0f} us, longer than the {:.0f} us spin ahead of them; the "
        "first launches of {} may include host latency",
        launches, queue_us, spin_us, what);
  gpu.synchronize();
  std::vector<double> us;
  for (int b = 0; b < batches; ++b)
    us.push_back(1e3 * gpu.elapsed_ms(gpu.event(2 * static_cast<std::size_t>(b)),
                                      gpu.event(2 * static_cast<std::size_t>(b) + 1)) /
                 ARM_BATCH);
  return median(us);
}

double copy_us(GpuSession& gpu, double moved, int launches) {
  const std::size_t bytes = (static_cast<std::size_t>(moved / 2) + 255) / 256 * 256;
  const std::size_t copies = std::max<std::size_t>(1, (2 * gpu.l2_bytes() + 2 * bytes - 1) / (2 * bytes));
  test::DeviceBuffer src(gpu.context(), bytes * copies), dst(gpu.context(), bytes * copies);
  std::size_t cursor = 0;
  return time_launches_us(
      gpu,
      [&] {
        const std::size_t offset = (cursor++ % copies) * bytes;
        driver::check(gpu.api(),
                      gpu.api().cuMemcpyDtoDAsync_v2(reinterpret_cast<CUdeviceptr>(dst.get()) + offset,
                                                     reinterpret_cast<CUdeviceptr>(src.get()) + offset, bytes,
                                                     gpu.stream()),
                      "cuMemcpyDtoDAsync");
      },
      launches, "a copy of " + std::to_string(bytes) + " bytes");
}

void launch_empty(GpuSession& gpu, CUstream stream, std::string_view entry, bool dependent) {
  const CUfunction empty = gpu.function(BENCH_MODULE, entry);
  const void* x = nullptr;
  void* q = nullptr;
  float* scales = nullptr;
  std::uint32_t k = ops::FP8_QUANT_GROUP;
  void* args[] = {&x, &q, &scales, &k};
  driver::check(gpu.api(),
                driver::launch_kernel(gpu.api(), empty, Dim3{1, 1, 1}, Dim3{ops::FP8_QUANT_GROUP, 1, 1}, 0, stream,
                                      args, dependent),
                driver::launch_call_name(dependent));
}

double empty_us(GpuSession& gpu, int launches) {
  return time_launches_us(gpu, [&] { launch_empty(gpu, gpu.stream(), BENCH_EMPTY, false); }, launches, "the empty kernel");
}

}  // namespace kiln::bench

#pragma once
// The parts of `kiln-bench`, one file each. Every part adds its tables and target rows to the
// report; a measurement that cannot be made throws kiln::Error.

#include <cstdint>
#include <string>

namespace kiln::bench {

struct BenchPlan;
class Report;
class GpuSession;

/// CPU only: pick_with ns/call and NVRTC compile times, first, one after the other and in
/// parallel (bench_host.cpp).
void run_host(const BenchPlan& plan, Report& report);
/// CPU only: disk-cache hit and eviction pass with 10 and with 10,000 entries (bench_disk.cpp).
void run_disk(const BenchPlan& plan, Report& report);
/// CPU only, with KILN_REMOTE_CACHE set: an empty-disk node against a warm Redis, per module
/// (bench_remote.cpp); skipped, saying why, without it.
void run_remote(const BenchPlan& plan, Report& report);
/// GPU: fresh processes for driver start-up, cold and warm JIT (bench_jit.cpp). Run before this
/// process makes any GPU context of its own, so the children start as a user's process would.
void run_jit_processes(const BenchPlan& plan, Report& report);
/// GPU, in this process: memory-hit try_kernel and kiln's launch overhead over a raw
/// cuLaunchKernel (bench_launch.cpp).
void run_launch(const BenchPlan& plan, GpuSession& gpu, Report& report);
/// GPU: the copy ceiling, each arm at each shape, and the floor points (bench_gpu.cpp); decode
/// shapes as back-to-back launches and as a CUDA graph, next to an empty kernel (bench_decode.cpp).
/// Returns the copy ceiling in GB/s, which later parts compare against.
double run_gpu(const BenchPlan& plan, GpuSession& gpu, Report& report);
/// GPU: every variant of the quantizer family at the family shapes, time and fraction of the copy
/// ceiling `ceiling_gbps` measured in the same run (bench_variants.cpp).
void run_variants(const BenchPlan& plan, GpuSession& gpu, double ceiling_gbps, Report& report);
void run_decode(const BenchPlan& plan, GpuSession& gpu, Report& report);
/// GPU: a masked MoE batch (32 experts x 1024 slots, 5% valid) against the same batch unmasked and
/// one matrix of its valid rows (bench_moe.cpp).
void run_moe(const BenchPlan& plan, GpuSession& gpu, Report& report);

/// The hidden child of run_jit_processes, in a fresh process: `mode` "driver" (cuInit and the
/// primary context only) or "jit" (Service(0) and fp8_act_quant(), after the driver when
/// `driver_first`). `spawned_at_ns` is the parent's CLOCK_MONOTONIC just before it spawned us.
/// Prints one JSON line on stdout.
void run_jit_child(const std::string& mode, bool driver_first, std::int64_t spawned_at_ns);

}  // namespace kiln::bench

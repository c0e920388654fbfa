#pragma once
// Test doubles for the GPU path on a machine without one: a driver table whose functions act on a
// scripted, in-process fake (devices, contexts, modules, launches, injected failures, call counts),
// and a module provider that models a disk cache in front of a compiler.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/module_cache.hpp"
#include "driver/driver_api.hpp"

namespace kiln::test {

struct FakeDevice {
  std::string name;
  int major = 0;
  int minor = 0;
  int sm_count = 0;
};

struct FakeLaunch {
  std::string module;  // the fake binary's module tag
  std::string entry;
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  CUstream stream;
  void** args;
  CUcontext context;  // current when the launch was made
  bool dependent;     // through cuLaunchKernelEx with programmatic stream serialization (PDL)
};

// The one fake driver of the process: the functions in `api()` are plain function pointers, so
// they reach it through this instance. Thread-safe. Call reset() at the start of every test.
class FakeDriver {
 public:
  static FakeDriver& instance();

  // Forget every module, count, script and launch, and present `devices`.
  void reset(std::vector<FakeDevice> devices = {{"NVIDIA H200", 9, 0, 132}});
  // A loaded table whose every entry is this fake's.
  driver::DriverApi api() const;
  // What the real loader gives on a machine without libcuda.so.1.
  static driver::DriverApi missing();

  // The next `times` calls of `call` (the table entry's name, e.g. "cuModuleLoadDataEx") return
  // `result` and do nothing else.
  void fail_next(const std::string& call, CUresult result, int times = 1);

  // Runs at the start of every cuLaunchKernel(Ex), outside the fake's lock (to race a launch).
  void on_launch(std::function<void()> hook);
  // Launches of a function whose module was unloaded: on a real driver, a crash or worse.
  int uses_after_unload() const;

  int calls(const std::string& call) const;
  int loads() const;          // successful cuModuleLoadDataEx
  int unloads() const;        // successful cuModuleUnload
  int live_modules() const;   // loaded and not unloaded
  int retained(int ordinal) const;  // primary-context references held
  std::vector<FakeLaunch> launches() const;

  static CUcontext context_of(int ordinal);  // the primary context the fake hands out for a device
  static CUcontext foreign_context();        // a context no device owns, for a caller to push

 private:
  FakeDriver() = default;
};

// The image the fake driver loads: tagged with `module`, exporting `entries`.
std::vector<std::uint8_t> fake_cubin(const std::string& module, const std::vector<std::string>& entries);

// A ModuleProvider backed by a modelled disk keyed by (module, target name): a module on "disk"
// comes back with from_disk, any other is "compiled" (compile_ms = 2.5) and then put on disk;
// evict removes it from disk.
// Thread-safe.
class FakeProvider {
 public:
  ModuleProvider provider();

  // provide() throws a compile error (kiln::Error of kind compile with an NVRTC log, `nvrtc_result`
  // (an nvrtcResult: 6 is NVRTC_ERROR_COMPILATION, 1 NVRTC_ERROR_OUT_OF_MEMORY) and the retry
  // compile_retry gives it, as compile_module's) for these modules.
  void fail(const std::string& module, int nvrtc_result = 6);
  // The image of `module` exports only `entries` (to make an entry lookup fail).
  void export_only(const std::string& module, std::vector<std::string> entries);
  void put_on_disk(const std::string& module, const std::string& target);
  // Runs at the start of every provide(), outside the provider's lock (latches, slow compiles).
  void on_provide(std::function<void(const KernelSource&)> hook);

  int provided(const std::string& module) const;  // provide() calls for `module`
  int provided() const;                           // all provide() calls
  std::vector<std::string> evicted() const;       // evict() calls, in order

 private:
  ProvidedModule provide(const KernelSource& source, const Target& target);

  mutable std::mutex mutex_;
  std::map<std::string, int> failing_;  // module -> nvrtcResult
  std::map<std::string, std::vector<std::string>> exports_;
  std::set<std::pair<std::string, std::string>> disk_;
  std::map<std::string, int> provided_;
  std::vector<std::string> evicted_;
  std::function<void(const KernelSource&)> hook_;
};

// Blocks until `condition` holds, re-checking every millisecond, at most `seconds`; returns whether
// it held. Only for a state the code under test gives no signal of (a counter); where the test
// itself can signal, it uses a promise instead.
bool eventually(const std::function<bool()>& condition, double seconds = 20);

}  // namespace kiln::test

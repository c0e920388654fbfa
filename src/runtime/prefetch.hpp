#pragma once
/// @file
/// Compiling ahead: a ModuleProvider that starts its modules on worker threads at once and hands
/// each result to the first request for it.
///
/// Why: a fresh process spends 100+ ms retaining the primary context, and NVRTC's start-up and
/// compiles (or the disk reads that replace them) need no context. CudaBackend starts them as soon
/// as it knows the device's target, so they run while the driver builds the context.
#include <vector>

#include "runtime/module_cache.hpp"

namespace kiln {

/// The embedded modules whose family `target` carries (registry order).
std::vector<const KernelSource*> carried_modules(const Target& target);

/// `inner`, except that `inner.provide(*module, target)` starts now for each of `modules`, one
/// thread each. The first `provide` of such a module for `target` takes that result (waiting for
/// it, rethrowing its error); every other call, and every later call for the same module, goes to
/// `inner`. `evict` is `inner.evict`. Destroying the last copy waits for compiles still running.
ModuleProvider prefetching_provider(ModuleProvider inner, const Target& target,
                                    const std::vector<const KernelSource*>& modules);

}  // namespace kiln

// Programmatic dependent launch (PDL) inside kiln's kernels. Launched with programmatic stream
// serialization (kiln::LaunchOptions::programmatic_dependent), a kernel may start before the
// previous kernel on its stream has finished; `wait_for_prior_grid` blocks until that kernel has
// completed and its memory is visible, so everything after it sees the stream order. Launched
// without the attribute, both instructions return at once. KILN_NO_GRID_DEPENDENCY compiles them
// out: only bench/explore/family_geometry.cu sets it, to measure what they cost.
#pragma once

namespace kiln::pdl {

// Call before the first global memory access: the previous kernel may still write x, or read
// what this kernel is about to overwrite.
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(KILN_NO_GRID_DEPENDENCY)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Why right after the wait: the next kernel's own wait still holds it until this grid has
// completed, so starting it early only hides its launch latency; and its CTAs are scheduled
// only once every CTA of this grid has run this (or exited), which keeps them off the SMs while
// this grid still has CTAs to place.
__device__ __forceinline__ void allow_dependent_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(KILN_NO_GRID_DEPENDENCY)
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Both, at a kernel's start.
__device__ __forceinline__ void enter_stream_order() {
  wait_for_prior_grid();
  allow_dependent_grid();
}

}  // namespace kiln::pdl

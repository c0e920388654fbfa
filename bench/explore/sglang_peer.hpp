// The one entry point of bench/explore/sglang_peer.cu (a separate translation unit because SGLang's kernel
// is compiled with --use_fast_math, as SGLang compiles it, and kiln's twin must not be).
#pragma once
#include <cuda_runtime.h>

// Quantizes a contiguous [m, k] bf16 x into e4m3 q and row-major fp32 scales with SGLang's kernel;
// `pdl` launches it with programmatic stream serialization and SGLang's PDL instantiation.
cudaError_t sglang_quant_bf16_e4m3_g128(const void* x, void* q, float* scales, unsigned m, unsigned k, bool pdl,
                                        cudaStream_t stream);

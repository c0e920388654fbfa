// SGLang's JIT per-token-group quantizer (sglang 0.5.23, kernels/jit/csrc/gemm/per_token_group_quant.cuh),
// compiled from the installed wheel's own source with the flags its load_jit uses, for
// bench/explore/sglang_compare.cu to time beside kiln's twin on one GPU in one process (issue 16 compares
// kiln with this kernel). Only the bf16 -> e4m3, group 128, row-major fp32 scales variant: the
// seed's. bench/explore/sglang_compare.sh builds it; nothing in kiln's build includes it.
#include <cuda_runtime.h>
#include <gemm/per_token_group_quant.cuh>

#include "sglang_peer.hpp"

namespace {

using Trait = sglang::QuantTrait<__nv_bfloat16, __nv_fp8_e4m3, 128, /*kUe8m0=*/false, /*kRowMajor=*/true,
                                 /*kAligned=*/true, /*kFuseSiluAndMul=*/false>;

// The parameters and the grid as SGLang's build_quant_context and launch_flat_kernel set them for a
// contiguous [m, k] input: one 8-lane subwarp per group, 256-thread CTAs over all m * k / 128 groups.
template <bool kUsePdl>
cudaError_t launch(const void* x, void* q, float* scales, unsigned m, unsigned k, cudaStream_t stream) {
  sglang::QuantKernelParams params{};
  params.input = {const_cast<void*>(x), 0, static_cast<int64_t>(k)};
  params.output = {q, 0, static_cast<int64_t>(k)};
  params.scale.base = scales;
  params.scale.token_stride = k / Trait::kGroupSize;
  params.scale.group_stride = 1;
  params.scale.num_groups = k / Trait::kGroupSize;
  params.num_tokens = m;
  params.hidden_size = k;
  const long long threads = static_cast<long long>(m) * (k / Trait::kGroupSize) * Trait::kNumLanes;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>((threads + Trait::kBlockSize - 1) / Trait::kBlockSize));
  config.blockDim = dim3(Trait::kBlockSize);
  config.stream = stream;
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &pdl;
  config.numAttrs = kUsePdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, sglang::per_token_group_quant_flat_kernel<Trait, kUsePdl>, params);
}

}  // namespace

cudaError_t sglang_quant_bf16_e4m3_g128(const void* x, void* q, float* scales, unsigned m, unsigned k, bool pdl,
                                        cudaStream_t stream) {
  return pdl ? launch<true>(x, q, scales, m, k, stream) : launch<false>(x, q, scales, m, k, stream);
}

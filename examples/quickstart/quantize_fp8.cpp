#include "kiln/ops/group_quant.hpp"
#include "kiln/service.hpp"

// x: bf16 [m, k] on the service's GPU -> q: fp8 e4m3 [m, k], scales: fp32 [m, k / 128].
void quantize_fp8(kiln::Service& service, const void* x, void* q, float* scales, std::uint64_t m,
                  std::uint64_t k, void* stream) {
  const kiln::ops::QuantVariant variant;  // bf16 in, groups of 128, e4m3 out, row-major scales
  const kiln::ops::QuantArgs args{x, q, scales, m, k, 0, 1e-10f, stream};
  service.group_quant(variant).launch(service.gpu(), args);  // throws kiln::Error, naming the argument
}

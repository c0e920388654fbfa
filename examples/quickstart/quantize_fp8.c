#include "kiln/kiln.h"

/* x: bf16 [m, k] on the service's GPU -> q: fp8 e4m3 [m, k], scales: fp32 [m, k / 128]. */
kiln_status quantize_fp8(kiln_service* service, const void* x, void* q, float* scales, uint64_t m, uint64_t k,
                         void* stream) {
  kiln_quant_params params; /* defaults: bf16 in, groups of 128, e4m3 out, row-major scales */
  kiln_status status = kiln_quant_params_init(&params);
  if (status != KILN_OK) return status;
  return kiln_quant(service, &params, x, q, scales, m, k, stream);
}

// The variant families kiln ships: their parameters, allowed values and impossible combinations.
// Each parameter's macro and numbers must match what its kernels_src/ source reads.
#include "jit/variants.hpp"

namespace kiln {

namespace {

std::string quant_refusal(const VariantFamily& family, const VariantChoice& choice) {
  const std::string& out = family.value(choice, "out");
  const std::string& scales = family.value(choice, "scales");
  const bool ue8m0 = family.value(choice, "ue8m0") == "1";
  if (out == "int8" && ue8m0)
    return "parameter 'ue8m0': out=int8 takes fp32 scales (ue8m0=0); UE8M0 scales exist only for out=e4m3";
  if (scales == "packed" && !ue8m0)
    return "parameter 'scales': scales=packed holds UE8M0 exponents and needs ue8m0=1 (or scales=row, col, col_tma)";
  return {};
}

// The kernel's KILN_Q_ITEMS == 2 (kernels_src/common/per_token_group_quant.cuh), whose variants
// also define per_token_group_quant_one_group: with SiLU, two lanes a group (16-bit input, group 32) and
// scales not packed; without it, anything but 16-bit input to e4m3 with fp32 scales.
// kiln::ops::GroupQuant::items_per_slot states the same rule for the grid; test_group_quant checks
// the two agree for every variant.
std::vector<std::string> quant_entries(const VariantFamily& family, const VariantChoice& choice) {
  const bool sixteen_bit = family.value(choice, "in") != "fp32";
  const bool packed = family.value(choice, "scales") == "packed";
  const bool two_groups = family.value(choice, "silu") == "1"
                              ? sixteen_bit && family.value(choice, "group") == "32" && !packed
                              : !(sixteen_bit && family.value(choice, "out") == "e4m3" && !packed);
  if (two_groups) return {"per_token_group_quant", "per_token_group_quant_one_group"};
  return {"per_token_group_quant"};
}

// The quantizer's parameters, shared by its two families (one matrix, a batch of experts).
std::vector<VariantParameter> quant_parameters() {
  return {
      {"in", "KILN_Q_IN", {"bf16", "fp16", "fp32"}, {0, 1, 2}, "bf16", "", "input element type"},
      {"group", "KILN_Q_GROUP", {"32", "64", "128"}, {32, 64, 128}, "128", "g", "elements per group"},
      {"out", "KILN_Q_OUT", {"e4m3", "int8"}, {0, 1}, "e4m3", "", "output code: fp8 e4m3 (+-448) or int8 (+-127)"},
      {"scales", "KILN_Q_SCALES", {"row", "col", "col_tma", "packed"}, {0, 1, 2, 3}, "row", "",
       "scale layout: row-major fp32 [M, G]; column-major fp32 [G, M]; column-major with M padded to 4; "
       "UE8M0 exponents packed four per int32 [ceil(G/4), M padded to 4]"},
      {"ue8m0", "KILN_Q_UE8M0", {"0", "1"}, {0, 1}, "0", "", "scales rounded up to a power of two"},
      {"silu", "KILN_Q_SILU", {"0", "1"}, {0, 1}, "0", "", "input [M, 2K]: quantize silu(x[:, :K]) * x[:, K:]"},
  };
}

}  // namespace

const std::vector<VariantFamily>& variant_families() {
  static const std::vector<VariantFamily> families = {
      {"per_token_group_quant", "per-token-group quantizer: one scale per group of a row, vLLM's numerics",
       quant_parameters(), quant_refusal, quant_entries},
      {"per_token_group_quant_batched",
       "the per-token-group quantizer over a batch of experts [E, T, K] (MoE), rows past a device count per "
       "expert untouched",
       quant_parameters(), quant_refusal, nullptr},
  };
  return families;
}

}  // namespace kiln

#include "quant_call.hpp"

#include <cstdint>
#include <limits>

#include "kiln/error.hpp"
#include "kiln/ops/fp8_act_quant.hpp"
#include "kiln/service.hpp"

namespace kiln::python {

namespace {

const char* name(QuantInput input) {
  switch (input) {
    case QuantInput::bf16: return "bf16";
    case QuantInput::fp16: return "fp16";
    case QuantInput::fp32: return "fp32";
  }
  return "?";
}

const char* name(QuantOutput output) { return output == QuantOutput::e4m3 ? "e4m3" : "int8"; }

const char* name(ScaleLayout scales) {
  switch (scales) {
    case ScaleLayout::row_major: return "row_major";
    case ScaleLayout::column_major: return "column_major";
    case ScaleLayout::column_major_tma: return "column_major_tma";
    case ScaleLayout::ue8m0_packed: return "ue8m0_packed";
  }
  return "?";
}

// The seed's variant, the one the library launches today (bf16, 128, e4m3, row-major fp32).
bool is_seed(const QuantVariant& v) {
  return v.input == QuantInput::bf16 && v.group == 128 && v.output == QuantOutput::e4m3 &&
         v.scales == ScaleLayout::row_major && !v.ue8m0 && !v.silu_and_mul;
}

[[noreturn]] void not_implemented(const QuantVariant& variant, const std::string& what) {
  throw VariantNotImplemented{"kiln: variant " + to_string(variant) + ": " + what +
                              " is not in this build of the library yet (it has bf16/g128/e4m3/row_major only)"};
}

std::uint32_t checked_u32(const char* argument, std::int64_t value, std::int64_t most) {
  if (value < 0 || value > most)
    throw_invalid_argument(argument, "0.." + std::to_string(most), std::to_string(value));
  return static_cast<std::uint32_t>(value);
}

}  // namespace

std::string to_string(const QuantVariant& v) {
  std::string text = std::string(name(v.input)) + "/g" + std::to_string(v.group) + "/" + name(v.output) + "/" +
                     name(v.scales);
  if (v.ue8m0) text += "/ue8m0";
  if (v.silu_and_mul) text += "/silu_and_mul";
  return text;
}

void quantize(Service& service, const QuantVariant& variant, const QuantArgs& args) {
  if (!is_seed(variant)) not_implemented(variant, "this variant");
  // Why exact: the seed's kernel has vLLM's default eps built in.
  if (args.eps != 1e-10f) not_implemented(variant, "eps other than 1e-10");
  if (args.x_row_stride != 0 && args.x_row_stride != args.k) not_implemented(variant, "a strided x (row stride)");
  const std::uint32_t m = checked_u32("m", args.m, std::numeric_limits<std::int32_t>::max());
  const std::uint32_t k = checked_u32("k", args.k, std::numeric_limits<std::uint32_t>::max());
  service.fp8_act_quant().launch(service.gpu(), args.x, args.q, static_cast<float*>(args.scales), m, k, args.stream);
}

bool warm(Service& service, const QuantVariant& variant) {
  if (!is_seed(variant)) not_implemented(variant, "this variant");
  return service.fp8_act_quant().available();
}

}  // namespace kiln::python

// The shared part of kiln._kiln_torch (torch_quant_core.hpp).
#include "torch_quant_core.hpp"

#include <ATen/TensorUtils.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

namespace kiln_torch {

using kiln::ops::QuantArgs;
using kiln::ops::QuantInput;
using kiln::ops::QuantOutput;
using kiln::ops::QuantScales;
using kiln::ops::QuantVariant;

const kiln_python::QuantEntry* entry = nullptr;

namespace {

// _variant.ALIGNMENT: the family's kernels move x and q in 16-byte vectors.
constexpr std::int64_t alignment = 16;

// _torch_ops._address: the data address, or for a meta tensor its offset into the allocation.
std::int64_t address(const at::Tensor& t) {
  return t.is_meta() ? t.storage_offset() * static_cast<std::int64_t>(t.element_size())
                     : static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(t.data_ptr()));
}

at::DimVector q_shape(const at::Tensor& x, std::int64_t k) {
  at::DimVector shape(x.sizes().begin(), x.sizes().end());
  shape.back() = k;
  return shape;
}

// _torch_ops._empty_scales (_variant.scale_geometry): row-major [..., G]; the column-major layouts
// are (M, G) views of (G, M) storage, M padded to 4 for TMA (the padding stays allocated: DeepGEMM
// reads whole boxes), the packed one int32 words of four exponents.
at::Tensor empty_scales(const at::Tensor& x, const Rows& rows, const QuantVariant& v) {
  const std::int64_t groups = rows.k / v.group;
  const auto options = at::TensorOptions().device(x.device());
  if (v.scales == QuantScales::row_major) return at::empty(q_shape(x, groups), options.dtype(at::kFloat));
  const std::int64_t m = rows.m;
  const std::int64_t padded = v.scales == QuantScales::column_major ? m : (m + 3) / 4 * 4;
  const bool packed = v.scales == QuantScales::ue8m0_packed;
  const std::int64_t columns = packed ? (groups + 3) / 4 : groups;
  const at::Tensor storage = at::empty({columns, padded}, options.dtype(packed ? at::kInt : at::kFloat));
  return storage.as_strided({m, columns}, {1, padded});
}

}  // namespace

at::ScalarType q_dtype_of(QuantOutput output) { return output == QuantOutput::int8 ? at::kChar : at::kFloat8_e4m3fn; }

std::optional<Flags> make_flags(QuantOutput output, std::int64_t group, double eps, bool column_major, bool tma_aligned,
                                bool ue8m0, bool packed, bool silu) {
  if (group != 32 && group != 64 && group != 128) return std::nullopt;
  // Why the upper bound: converting a double beyond float's range is undefined behaviour.
  if (!(eps > 0 && eps <= std::numeric_limits<float>::max())) return std::nullopt;
  if (tma_aligned && !column_major) return std::nullopt;
  if (packed && !(ue8m0 && column_major && tma_aligned)) return std::nullopt;
  if (output == QuantOutput::int8 && ue8m0) return std::nullopt;
  Flags flags;
  QuantVariant& v = flags.variant;
  v.output = output;
  v.group = static_cast<std::uint32_t>(group);
  v.scales = packed          ? QuantScales::ue8m0_packed
             : !column_major ? QuantScales::row_major
             : tma_aligned   ? QuantScales::column_major_tma
                             : QuantScales::column_major;
  v.ue8m0 = ue8m0;
  v.silu_and_mul = silu;
  flags.eps = static_cast<float>(eps);
  return flags;
}

std::optional<QuantOutput> output_of(std::string_view output) {
  if (output == "e4m3") return QuantOutput::e4m3;
  if (output == "int8") return QuantOutput::int8;
  return std::nullopt;
}

std::optional<ScaleFlags> scale_flags_of(std::string_view layout) {
  if (layout == "row_major") return ScaleFlags{false, false, false};
  if (layout == "column_major") return ScaleFlags{true, false, false};
  if (layout == "column_major_tma") return ScaleFlags{true, true, false};
  if (layout == "ue8m0_packed") return ScaleFlags{true, true, true};
  return std::nullopt;
}

// _torch_ops._check_x (with _variant.check_shape and check_alignment).
std::optional<Rows> check_x(const at::Tensor& x, QuantVariant& v) {
  switch (x.scalar_type()) {
    case at::kBFloat16: v.input = QuantInput::bf16; break;
    case at::kHalf: v.input = QuantInput::fp16; break;
    case at::kFloat: v.input = QuantInput::fp32; break;
    default: return std::nullopt;
  }
  if (x.layout() != at::kStrided || !(x.is_cuda() || x.is_meta())) return std::nullopt;
  const auto shape = x.sizes();
  if (shape.empty() || (v.scales != QuantScales::row_major && shape.size() != 2)) return std::nullopt;
  Rows rows;
  rows.k = shape.back();
  if (v.silu_and_mul) {
    if (rows.k % 2) return std::nullopt;
    rows.k /= 2;
  }
  if (rows.k % v.group) return std::nullopt;
  rows.m = 1;
  for (std::size_t i = 0; i + 1 < shape.size(); ++i) rows.m *= shape[i];
  if (shape.back() > 1 && x.strides().back() != 1) return std::nullopt;
  if (address(x) % alignment) return std::nullopt;
  if (rows.m <= 1 || x.is_contiguous()) return rows;
  // Why decline on no elements: Python's view(-1, K) cannot infer -1 there.
  if (x.numel() == 0) return std::nullopt;
  const auto collapsed = at::detail::computeStride(shape, x.strides(), at::IntArrayRef{rows.m, shape.back()});
  if (!collapsed) return std::nullopt;
  rows.stride = (*collapsed)[0];
  // Why: the library reads a row stride of 0 as dense; an expand()ed x's rows overlap.
  if (rows.stride < shape.back()) return std::nullopt;
  if (rows.stride * static_cast<std::int64_t>(x.element_size()) % alignment) return std::nullopt;
  return rows;
}

// _torch_ops._check_out_q.
bool out_q_fits(const at::Tensor& out_q, const at::Tensor& x, std::int64_t k, at::ScalarType q_dtype) {
  return out_q.scalar_type() == q_dtype && out_q.layout() == at::kStrided && out_q.sizes() == q_shape(x, k) &&
         out_q.device() == x.device() && out_q.is_contiguous() && address(out_q) % alignment == 0;
}

Outputs make_outputs(const at::Tensor& x, const at::Tensor* out_q, const Rows& rows, const Flags& flags) {
  Outputs outputs;
  if (out_q) {
    outputs.q = *out_q;
    // Why: as torch.autograd.graph.increment_version, which leaves inference tensors alone.
    if (!outputs.q.is_inference()) outputs.q.unsafeGetTensorImpl()->bump_version();
  } else {
    outputs.q = at::empty(q_shape(x, rows.k),
                          at::TensorOptions().device(x.device()).dtype(q_dtype_of(flags.variant.output)));
  }
  outputs.scales = empty_scales(x, rows, flags.variant);
  return outputs;
}

kiln_python::QuantStatus launch(const at::Tensor& x, const Outputs& outputs, const Rows& rows, const Flags& flags,
                                const char** message) {
  if (!x.is_cuda() || rows.m == 0 || rows.k == 0) return kiln_python::QuantStatus::ok;
  QuantArgs args;
  args.x = x.const_data_ptr();
  args.q = outputs.q.data_ptr();
  args.scales = outputs.scales.data_ptr();
  args.m = static_cast<std::uint64_t>(rows.m);
  args.k = static_cast<std::uint64_t>(rows.k);
  args.x_row_stride = static_cast<std::uint64_t>(rows.stride);
  args.eps = flags.eps;
  args.stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  return entry->quantize(x.device().index(), flags.variant, args, message);
}

}  // namespace kiln_torch

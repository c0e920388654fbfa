#pragma once
// What the eager call (torch_quant.cpp) and the ops' CUDA kernels (torch_op_kernels.cpp) share:
// the checks that mirror the Python path's, the outputs and the launch. Nothing here touches
// Python, so each caller decides what a refusal becomes: the eager call returns None, a kernel
// runs the op's Python body; either way the Python path raises the one documented error.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "quant_entry.hpp"

namespace kiln_torch {

/// kiln._kiln's quantize entry (its capsule), set once by the module's init.
extern const kiln_python::QuantEntry* entry;

struct Flags {
  kiln::ops::QuantVariant variant;
  float eps = 0;
};

struct Rows {
  std::int64_t m = 0;
  std::int64_t k = 0;
  std::int64_t stride = 0;  ///< elements between row starts, 0 = dense
};

at::ScalarType q_dtype_of(kiln::ops::QuantOutput output);

/// _variant.check_group_size, check_eps and scale_layout: the variant and eps, or nullopt for
/// anything the Python path refuses.
std::optional<Flags> make_flags(kiln::ops::QuantOutput output, std::int64_t group, double eps, bool column_major,
                                bool tma_aligned, bool ue8m0, bool packed, bool silu);

/// The ops' `output` and `layout` strings (_torch_ops._Q_DTYPES, _LAYOUT_FLAGS) as make_flags wants them.
std::optional<kiln::ops::QuantOutput> output_of(std::string_view output);
struct ScaleFlags {
  bool column_major, tma_aligned, packed;
};
std::optional<ScaleFlags> scale_flags_of(std::string_view layout);

/// _torch_ops._check_x: x's rows (and its input type written into `variant`), or nullopt.
std::optional<Rows> check_x(const at::Tensor& x, kiln::ops::QuantVariant& variant);

/// _torch_ops._check_out_q.
bool out_q_fits(const at::Tensor& out_q, const at::Tensor& x, std::int64_t k, at::ScalarType q_dtype);

struct Outputs {
  at::Tensor q, scales;
};

/// q (out_q if given, its version bumped as torch.autograd.graph.increment_version would) and the
/// scales (_torch_ops._empty_outputs), from PyTorch's caching allocator on x's device.
Outputs make_outputs(const at::Tensor& x, const at::Tensor* out_q, const Rows& rows, const Flags& flags);

/// Launches on PyTorch's current stream of x's device (nothing for an empty x); on a status other
/// than ok, `*message` says why (quant_entry.hpp). May compile: call it without the GIL.
kiln_python::QuantStatus launch(const at::Tensor& x, const Outputs& outputs, const Rows& rows, const Flags& flags,
                                const char** message);

}  // namespace kiln_torch

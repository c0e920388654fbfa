// kiln._kiln_torch: the eager call of kiln.per_token_group_quant_fp8/int8 in one C++ function,
// built only against the PyTorch found at build time. Python's own call path (checks, two
// allocations, the stream lookup and the launch, python/kiln/_torch_ops.py) costs about 18 us a
// call; this one parses the public function's arguments, checks x and out_q, allocates q and the
// scales with PyTorch's caching allocator and launches on PyTorch's current stream through _kiln's
// Service (quant_entry.hpp).
//
// Why it declines instead of raising: whatever it does not accept (a bad argument, an odd flag
// type, a CPU tensor, a traced call) makes it return None before anything is allocated, and the
// caller runs the Python path, which raises the one documented error. The messages then exist
// once, in Python, and any case this file does not know is still handled exactly as before.
#include <ATen/TensorUtils.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "quant_entry.hpp"

namespace {

using kiln::ops::QuantArgs;
using kiln::ops::QuantInput;
using kiln::ops::QuantOutput;
using kiln::ops::QuantScales;
using kiln::ops::QuantVariant;

const kiln_python::QuantEntry* entry = nullptr;
// kiln._kiln_torch.LaunchError, a RuntimeError: what the Python caller rewords when a CUDA graph
// capture is why no kernel could load (_torch_ops.reword_in_capture), and nothing else.
PyObject* launch_error = nullptr;

// _variant.ALIGNMENT: the family's kernels move x and q in 16-byte vectors.
constexpr std::int64_t alignment = 16;

struct Flags {
  QuantVariant variant;
  float eps = 0;
};

std::optional<bool> flag(PyObject* value) {
  if (value == Py_True) return true;
  if (value == Py_False) return false;
  return std::nullopt;
}

// _variant.check_group_size, check_eps and scale_layout, and check_dtype, accepting only what they
// accept (plain ints, floats and bools).
std::optional<Flags> parse_flags(PyObject* const* args, QuantOutput output, at::ScalarType q_dtype) {
  Flags parsed;
  QuantVariant& v = parsed.variant;
  v.output = output;
  if (!PyLong_CheckExact(args[1])) return std::nullopt;
  const long group = PyLong_AsLong(args[1]);
  if (group != 32 && group != 64 && group != 128) {
    PyErr_Clear();  // a value past a long
    return std::nullopt;
  }
  v.group = static_cast<std::uint32_t>(group);
  double eps = 0;
  if (PyFloat_CheckExact(args[2])) {
    eps = PyFloat_AS_DOUBLE(args[2]);
  } else if (PyLong_CheckExact(args[2])) {
    eps = PyLong_AsDouble(args[2]);
    if (eps == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  // Why the upper bound: converting a double beyond float's range is undefined behaviour.
  if (!(eps > 0 && eps <= std::numeric_limits<float>::max())) return std::nullopt;
  parsed.eps = static_cast<float>(eps);
  const auto column_major = flag(args[3]), tma_aligned = flag(args[4]), ue8m0 = flag(args[5]),
             packed = flag(args[8]), silu = flag(args[9]);
  if (!column_major || !tma_aligned || !ue8m0 || !packed || !silu) return std::nullopt;
  if (*tma_aligned && !*column_major) return std::nullopt;
  if (*packed && !(*ue8m0 && *column_major && *tma_aligned)) return std::nullopt;
  v.scales = *packed         ? QuantScales::ue8m0_packed
             : !*column_major ? QuantScales::row_major
             : *tma_aligned   ? QuantScales::column_major_tma
                              : QuantScales::column_major;
  v.ue8m0 = *ue8m0;
  v.silu_and_mul = *silu;
  if (output == QuantOutput::int8 && v.ue8m0) return std::nullopt;
  PyObject* dtype = args[7];
  if (dtype != Py_None && !(THPDtype_Check(dtype) && reinterpret_cast<THPDtype*>(dtype)->scalar_type == q_dtype))
    return std::nullopt;
  return parsed;
}

// _torch_ops._address: the data address, or for a meta tensor its offset into the allocation.
std::int64_t address(const at::Tensor& t) {
  return t.is_meta() ? t.storage_offset() * static_cast<std::int64_t>(t.element_size())
                     : static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(t.data_ptr()));
}

struct Rows {
  std::int64_t m = 0;
  std::int64_t k = 0;
  std::int64_t stride = 0;  ///< elements between row starts, 0 = dense
};

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

at::DimVector q_shape(const at::Tensor& x, std::int64_t k) {
  at::DimVector shape(x.sizes().begin(), x.sizes().end());
  shape.back() = k;
  return shape;
}

// _torch_ops._check_out_q.
bool out_q_fits(const at::Tensor& out_q, const at::Tensor& x, std::int64_t k, at::ScalarType q_dtype) {
  return out_q.scalar_type() == q_dtype && out_q.layout() == at::kStrided && out_q.sizes() == q_shape(x, k) &&
         out_q.device() == x.device() && out_q.is_contiguous() && address(out_q) % alignment == 0;
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

// (first, second), taking both references, which may be null (a failed wrap).
PyObject* pair(PyObject* first, PyObject* second) {
  PyObject* tuple = first && second ? PyTuple_New(2) : nullptr;
  if (!tuple) {
    Py_XDECREF(first);
    Py_XDECREF(second);
    return nullptr;
  }
  PyTuple_SET_ITEM(tuple, 0, first);
  PyTuple_SET_ITEM(tuple, 1, second);
  return tuple;
}

// False with the Python error set when kiln refuses or fails.
bool launch(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales, const Rows& rows,
                 const Flags& flags) {
  QuantArgs args;
  args.x = x.const_data_ptr();
  args.q = q.data_ptr();
  args.scales = scales.data_ptr();
  args.m = static_cast<std::uint64_t>(rows.m);
  args.k = static_cast<std::uint64_t>(rows.k);
  args.x_row_stride = static_cast<std::uint64_t>(rows.stride);
  args.eps = flags.eps;
  args.stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  const char* message = nullptr;
  kiln_python::QuantStatus status;
  // Why without the GIL: the first call of a variant on a device may compile for a while.
  Py_BEGIN_ALLOW_THREADS
  status = entry->quantize(x.device().index(), flags.variant, args, &message);
  Py_END_ALLOW_THREADS
  if (status == kiln_python::QuantStatus::ok) return true;
  PyErr_SetString(status == kiln_python::QuantStatus::invalid_argument ? PyExc_ValueError : launch_error, message);
  return false;
}

// quantize(x, group_size, eps, column_major_scales, tma_aligned_scales, use_ue8m0, out_q, dtype,
//          pack_ue8m0_scales, fuse_silu_and_mul, int8) -> (q, scales), or None: take the Python path.
PyObject* quantize(PyObject*, PyObject* const* args, Py_ssize_t count) {
  HANDLE_TH_ERRORS
  if (count != 11) {
    PyErr_SetString(PyExc_TypeError, "_kiln_torch.quantize: expected 11 positional arguments");
    return nullptr;
  }
  const auto int8 = flag(args[10]);
  if (!int8) {
    PyErr_SetString(PyExc_TypeError, "_kiln_torch.quantize: the last argument (int8) must be a bool");
    return nullptr;
  }
  const at::ScalarType q_dtype = *int8 ? at::kChar : at::kFloat8_e4m3fn;
  // Why: a torch_dispatch mode (FakeTensorMode, make_fx) must see the op, not its body.
  if (!THPVariable_CheckExact(args[0]) || c10::impl::TorchDispatchModeTLS::stack_len() != 0) Py_RETURN_NONE;
  auto flags = parse_flags(args, *int8 ? QuantOutput::int8 : QuantOutput::e4m3, q_dtype);
  if (!flags) Py_RETURN_NONE;
  const at::Tensor& x = THPVariable_Unpack(args[0]);
  const auto rows = check_x(x, flags->variant);
  if (!rows) Py_RETURN_NONE;
  PyObject* out_q = args[6];
  const bool into = out_q != Py_None;
  if (into && !(THPVariable_CheckExact(out_q) && out_q_fits(THPVariable_Unpack(out_q), x, rows->k, q_dtype)))
    Py_RETURN_NONE;
  std::optional<c10::cuda::CUDAGuard> guard;
  if (x.is_cuda()) guard.emplace(x.device());
  at::Tensor q;
  if (into) {
    q = THPVariable_Unpack(out_q);
    // Why: as torch.autograd.graph.increment_version, which leaves inference tensors alone.
    if (!q.is_inference()) q.unsafeGetTensorImpl()->bump_version();
  } else {
    q = at::empty(q_shape(x, rows->k), at::TensorOptions().device(x.device()).dtype(q_dtype));
  }
  const at::Tensor scales = empty_scales(x, *rows, flags->variant);
  if (x.is_cuda() && rows->m != 0 && rows->k != 0 && !launch(x, q, scales, *rows, *flags)) return nullptr;
  if (into) Py_INCREF(out_q);
  return pair(into ? out_q : THPVariable_Wrap(q), THPVariable_Wrap(scales));
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"quantize", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&quantize)), METH_FASTCALL,
     "The eager body of kiln.per_token_group_quant_fp8/int8, or None where the Python path must run."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kiln_torch",
                      "kiln's eager quantizer call against PyTorch's C++ API (use the package, not this module)", -1,
                      methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__kiln_torch() {
  entry = static_cast<const kiln_python::QuantEntry*>(PyCapsule_Import(kiln_python::quant_entry_capsule, 0));
  if (!entry) return nullptr;
  if (entry->version != kiln_python::quant_entry_version) {
    PyErr_Format(PyExc_ImportError, "kiln._kiln_torch: kiln._kiln's quantize entry is version %d, expected %d",
                 entry->version, kiln_python::quant_entry_version);
    return nullptr;
  }
  PyObject* made = PyModule_Create(&module);
  if (!made) return nullptr;
  // Why one reference kept here: launch() raises it for the life of the process.
  launch_error = PyErr_NewException("kiln._kiln_torch.LaunchError", PyExc_RuntimeError, nullptr);
  if (!launch_error) {
    Py_DECREF(made);
    return nullptr;
  }
  Py_INCREF(launch_error);
  if (PyModule_AddObject(made, "LaunchError", launch_error) < 0) {  // Python 3.9 has no AddObjectRef
    Py_DECREF(launch_error);
    Py_DECREF(made);
    return nullptr;
  }
  return made;
}

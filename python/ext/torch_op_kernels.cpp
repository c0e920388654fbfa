// The ops' CUDA kernels: torch.ops.kiln.* on CUDA tensors (every call a compiled graph makes) runs
// C++ from PyTorch's dispatcher to the launch. The ops' Python kernel (CompositeExplicitAutograd,
// python/kiln/_torch_ops.py) stays for every other device; on CUDA it cost a Python call with its
// arguments boxed and unboxed on each dispatch, 2.9 us a call on the CPU machine where a C++
// kernel's whole dispatch takes about 0.8.
//
// Why a declining kernel runs the Python body instead of raising: whatever it does not take as is
// (a bad string, group or eps, an x or out_q the checks refuse, a launch that failed) goes to the
// op's Python body, which raises the one documented error (ValueError naming the argument, the
// capture's "call kiln.warm(...)" message) or runs the op. The messages then exist once, in Python.
#include "torch_op_kernels.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "torch_quant_core.hpp"

namespace kiln_torch {
namespace {

// _torch_ops.per_token_group_quant and per_token_group_quant_out, one reference each for the life
// of the process (the kernels may run until it exits).
PyObject* python_body = nullptr;
PyObject* python_body_out = nullptr;
// Why never destroyed: the registrations must outlive every call, the last ones included, and a
// static destructor would run after Python has gone.
torch::Library* cuda_kernels = nullptr;

struct OpArguments {
  const at::Tensor& x;
  const at::Tensor* out_q;  ///< null for per_token_group_quant
  std::int64_t group_size;
  double eps;
  std::string_view output;
  std::string_view layout;
  bool use_ue8m0;
  bool silu_and_mul;
};

// The op's work where the checks take it: the outputs, or nullopt for the Python body.
std::optional<Outputs> quantize(const OpArguments& a) {
  // Why: the dispatcher picks the CUDA kernel when any tensor argument is on CUDA (out_q may be).
  if (!a.x.is_cuda()) return std::nullopt;
  const auto output = output_of(a.output);
  const auto scales = scale_flags_of(a.layout);
  if (!output || !scales) return std::nullopt;
  auto flags = make_flags(*output, a.group_size, a.eps, scales->column_major, scales->tma_aligned, a.use_ue8m0,
                          scales->packed, a.silu_and_mul);
  if (!flags) return std::nullopt;
  const auto rows = check_x(a.x, flags->variant);
  if (!rows) return std::nullopt;
  if (a.out_q && !out_q_fits(*a.out_q, a.x, rows->k, q_dtype_of(*output))) return std::nullopt;
  const c10::cuda::CUDAGuard guard(a.x.device());
  Outputs outputs = make_outputs(a.x, a.out_q, *rows, *flags);
  const char* message = nullptr;
  if (launch(a.x, outputs, *rows, *flags, &message) != kiln_python::QuantStatus::ok) return std::nullopt;
  return outputs;
}

// The arguments as the Python body takes them, in a new tuple; null with the Python error set.
PyObject* python_arguments(const OpArguments& a) {
  std::vector<PyObject*> items{THPVariable_Wrap(a.x)};
  if (a.out_q) items.push_back(THPVariable_Wrap(*a.out_q));
  items.push_back(PyLong_FromLongLong(a.group_size));
  items.push_back(PyFloat_FromDouble(a.eps));
  items.push_back(PyUnicode_FromStringAndSize(a.output.data(), static_cast<Py_ssize_t>(a.output.size())));
  items.push_back(PyUnicode_FromStringAndSize(a.layout.data(), static_cast<Py_ssize_t>(a.layout.size())));
  items.push_back(PyBool_FromLong(a.use_ue8m0));
  items.push_back(PyBool_FromLong(a.silu_and_mul));
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(items.size()));
  bool complete = tuple != nullptr;
  for (std::size_t i = 0; i < items.size(); ++i) {
    complete = complete && items[i];
    if (tuple) {
      PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), items[i]);  // a null slot is fine to free
    } else {
      Py_XDECREF(items[i]);
    }
  }
  if (!complete) Py_CLEAR(tuple);
  return tuple;
}

at::Tensor tensor_of(PyObject* value, const char* what) {
  TORCH_CHECK(value && THPVariable_Check(value), "kiln: the op's Python body returned no tensor for ", what);
  return THPVariable_Unpack(value);
}

// Runs the Python body with the GIL; its exception (ValueError, TypeError, RuntimeError) propagates
// to the op's caller as that exception.
template <class Result, class Convert>
Result run_python_body(PyObject* body, const OpArguments& a, Convert convert) {
  pybind11::gil_scoped_acquire gil;
  PyObject* arguments = python_arguments(a);
  PyObject* result = arguments ? PyObject_Call(body, arguments, nullptr) : nullptr;
  Py_XDECREF(arguments);
  if (!result) {
    python_error error;
    error.persist();
    throw error;
  }
  // Why a guard: convert may throw, and the result's reference must go either way.
  const std::unique_ptr<PyObject, void (*)(PyObject*)> owned(result, [](PyObject* o) { Py_DECREF(o); });
  return convert(result);
}

std::tuple<at::Tensor, at::Tensor> per_token_group_quant(const at::Tensor& x, c10::SymInt group_size, double eps,
                                                         c10::string_view output, c10::string_view layout,
                                                         bool use_ue8m0, bool silu_and_mul) {
  const OpArguments a{x, nullptr, group_size.guard_int(__FILE__, __LINE__), eps, output, layout, use_ue8m0,
                      silu_and_mul};
  if (auto outputs = quantize(a)) return {std::move(outputs->q), std::move(outputs->scales)};
  return run_python_body<std::tuple<at::Tensor, at::Tensor>>(python_body, a, [](PyObject* result) {
    TORCH_CHECK(PyTuple_Check(result) && PyTuple_GET_SIZE(result) == 2,
                "kiln: the op's Python body returned no (q, scales) pair");
    return std::make_tuple(tensor_of(PyTuple_GET_ITEM(result, 0), "q"), tensor_of(PyTuple_GET_ITEM(result, 1), "scales"));
  });
}

at::Tensor per_token_group_quant_out(const at::Tensor& x, at::Tensor& out_q, c10::SymInt group_size, double eps,
                                     c10::string_view output, c10::string_view layout, bool use_ue8m0,
                                     bool silu_and_mul) {
  const OpArguments a{x, &out_q, group_size.guard_int(__FILE__, __LINE__), eps, output, layout, use_ue8m0,
                      silu_and_mul};
  if (auto outputs = quantize(a)) return std::move(outputs->scales);
  return run_python_body<at::Tensor>(python_body_out, a, [](PyObject* result) { return tensor_of(result, "scales"); });
}

}  // namespace

PyObject* register_op_kernels(PyObject*, PyObject* const* args, Py_ssize_t count) {
  HANDLE_TH_ERRORS
  if (count != 2 || !PyCallable_Check(args[0]) || !PyCallable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_kiln_torch.register_op_kernels: expected the two ops' Python bodies");
    return nullptr;
  }
  if (cuda_kernels) {
    PyErr_SetString(PyExc_RuntimeError, "_kiln_torch.register_op_kernels: the kernels are registered already");
    return nullptr;
  }
  auto kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "kiln", c10::DispatchKey::CUDA, __FILE__,
                                                  __LINE__);
  kernels->impl("per_token_group_quant", TORCH_FN(per_token_group_quant));
  kernels->impl("per_token_group_quant_out", TORCH_FN(per_token_group_quant_out));
  Py_INCREF(args[0]);
  Py_INCREF(args[1]);
  python_body = args[0];
  python_body_out = args[1];
  cuda_kernels = kernels.release();
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

}  // namespace kiln_torch

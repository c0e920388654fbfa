// kiln._kiln_torch: the eager call of kiln.per_token_group_quant_fp8/int8 in one C++ function,
// built only against the PyTorch found at build time. Python's own call path (checks, two
// allocations, the stream lookup and the launch, python/kiln/_torch_ops.py) costs about 18 us a
// call; this one parses the public function's arguments, checks x and out_q, allocates q and the
// scales with PyTorch's caching allocator and launches on PyTorch's current stream through _kiln's
// Service (quant_entry.hpp). The same module registers the ops' CUDA kernels (torch_op_kernels.cpp).
//
// Why it declines instead of raising: whatever it does not accept (a bad argument, an odd flag
// type, a CPU tensor, a traced call) makes it return None before anything is allocated, and the
// caller runs the Python path, which raises the one documented error. The messages then exist
// once, in Python, and any case this file does not know is still handled exactly as before.
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <optional>

#include "torch_op_kernels.hpp"
#include "torch_quant_core.hpp"

namespace {

using kiln::ops::QuantOutput;
using kiln_torch::Flags;

// kiln._kiln_torch.LaunchError, a RuntimeError: what the Python caller rewords when a CUDA graph
// capture is why no kernel could load (_torch_ops.reword_in_capture), and nothing else.
PyObject* launch_error = nullptr;

std::optional<bool> flag(PyObject* value) {
  if (value == Py_True) return true;
  if (value == Py_False) return false;
  return std::nullopt;
}

// make_flags from quantize's arguments and check_dtype, accepting only what the Python path
// accepts (plain ints, floats and bools).
std::optional<Flags> parse_flags(PyObject* const* args, QuantOutput output) {
  if (!PyLong_CheckExact(args[1])) return std::nullopt;
  int overflow = 0;
  const long long group = PyLong_AsLongLongAndOverflow(args[1], &overflow);
  if (overflow) return std::nullopt;
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
  const auto column_major = flag(args[3]), tma_aligned = flag(args[4]), ue8m0 = flag(args[5]),
             packed = flag(args[8]), silu = flag(args[9]);
  if (!column_major || !tma_aligned || !ue8m0 || !packed || !silu) return std::nullopt;
  PyObject* dtype = args[7];
  if (dtype != Py_None &&
      !(THPDtype_Check(dtype) && reinterpret_cast<THPDtype*>(dtype)->scalar_type == kiln_torch::q_dtype_of(output)))
    return std::nullopt;
  return kiln_torch::make_flags(output, group, eps, *column_major, *tma_aligned, *ue8m0, *packed, *silu);
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
  const QuantOutput output = *int8 ? QuantOutput::int8 : QuantOutput::e4m3;
  // Why: a torch_dispatch mode (FakeTensorMode, make_fx) must see the op, not its body.
  if (!THPVariable_CheckExact(args[0]) || c10::impl::TorchDispatchModeTLS::stack_len() != 0) Py_RETURN_NONE;
  auto flags = parse_flags(args, output);
  if (!flags) Py_RETURN_NONE;
  const at::Tensor& x = THPVariable_Unpack(args[0]);
  const auto rows = kiln_torch::check_x(x, flags->variant);
  if (!rows) Py_RETURN_NONE;
  PyObject* out_q = args[6];
  const bool into = out_q != Py_None;
  if (into && !(THPVariable_CheckExact(out_q) &&
                kiln_torch::out_q_fits(THPVariable_Unpack(out_q), x, rows->k, kiln_torch::q_dtype_of(output))))
    Py_RETURN_NONE;
  std::optional<c10::cuda::CUDAGuard> guard;
  if (x.is_cuda()) guard.emplace(x.device());
  const kiln_torch::Outputs outputs =
      kiln_torch::make_outputs(x, into ? &THPVariable_Unpack(out_q) : nullptr, *rows, *flags);
  const char* message = nullptr;
  kiln_python::QuantStatus status;
  // Why without the GIL: the first call of a variant on a device may compile for a while.
  Py_BEGIN_ALLOW_THREADS
  status = kiln_torch::launch(x, outputs, *rows, *flags, &message);
  Py_END_ALLOW_THREADS
  if (status != kiln_python::QuantStatus::ok) {
    PyErr_SetString(status == kiln_python::QuantStatus::invalid_argument ? PyExc_ValueError : launch_error, message);
    return nullptr;
  }
  if (into) Py_INCREF(out_q);
  return pair(into ? out_q : THPVariable_Wrap(outputs.q), THPVariable_Wrap(outputs.scales));
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"quantize", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&quantize)), METH_FASTCALL,
     "The eager body of kiln.per_token_group_quant_fp8/int8, or None where the Python path must run."},
    {"register_op_kernels", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&kiln_torch::register_op_kernels)),
     METH_FASTCALL,
     "register_op_kernels(body, body_out): the ops' CUDA kernels in C++, each running its Python body where it declines."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kiln_torch",
                      "kiln's eager quantizer call against PyTorch's C++ API (use the package, not this module)", -1,
                      methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__kiln_torch() {
  const auto* entry = static_cast<const kiln_python::QuantEntry*>(PyCapsule_Import(kiln_python::quant_entry_capsule, 0));
  if (!entry) return nullptr;
  if (entry->version != kiln_python::quant_entry_version) {
    PyErr_Format(PyExc_ImportError, "kiln._kiln_torch: kiln._kiln's quantize entry is version %d, expected %d",
                 entry->version, kiln_python::quant_entry_version);
    return nullptr;
  }
  kiln_torch::entry = entry;
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

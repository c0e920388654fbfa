#pragma once
// The CUDA kernels of torch.ops.kiln.per_token_group_quant and per_token_group_quant_out.
#include <Python.h>

namespace kiln_torch {

/// register_op_kernels(body, body_out), for kiln._kiln_torch: registers both ops' CUDA kernels
/// (C++, once per process; the ops must be defined already) and keeps the ops' Python bodies,
/// which a kernel runs where it declines. Returns None, or null with a Python error set.
PyObject* register_op_kernels(PyObject* self, PyObject* const* args, Py_ssize_t count);

}  // namespace kiln_torch

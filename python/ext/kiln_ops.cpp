// kiln._kiln_ops: the kernels of torch.ops.kiln.per_token_group_quant and _out on PyTorch's stable
// ABI (torch/csrc/stable, built for TORCH_TARGET_VERSION 2.10): it uses only the stable C shim,
// never libtorch's C++ API, so one build loads into every PyTorch from 2.10 on. The schemas, the
// fake implementations and the Autograd fallthrough are Python's (python/kiln/_torch_ops.py), which
// defines the ops and then imports this module; its static registration adds these kernels at
// CompositeExplicitAutograd (every backend but Meta, whose kernel is the fake): a CUDA x runs the
// launch, any other gets the ValueError-worded refusal naming x.
//
// The checks and the outputs' geometry are libkiln_python's plan (quant_call.hpp), the same the
// fake asks for through kiln._kiln.plan; the launch goes through the process's Service of x's
// device, shared with kiln._kiln.
#include <Python.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include <optional>
#include <string>
#include <tuple>

#include "kiln/error.hpp"
#include "quant_call.hpp"

namespace {

using torch::stable::Tensor;

void check(AOTITorchError status, const char* what) {
  if (status != AOTI_TORCH_SUCCESS) throw std::runtime_error(std::string("kiln: ") + what + " failed");
}

int32_t dtype_of(const Tensor& t) {
  int32_t dtype = 0;
  check(aoti_torch_get_dtype(t.get(), &dtype), "aoti_torch_get_dtype");
  return dtype;
}

kiln_python::DType kiln_dtype(int32_t dtype) {
  using kiln_python::DType;
  if (dtype == aoti_torch_dtype_bfloat16()) return DType::bf16;
  if (dtype == aoti_torch_dtype_float16()) return DType::fp16;
  if (dtype == aoti_torch_dtype_float32()) return DType::fp32;
  if (dtype == aoti_torch_dtype_float8_e4m3fn()) return DType::e4m3;
  if (dtype == aoti_torch_dtype_int8()) return DType::int8;
  if (dtype == aoti_torch_dtype_int32()) return DType::int32;
  return DType::other;
}

// Python's spelling of the dtypes a message can name (x's wrong dtype included).
std::string dtype_text(int32_t dtype) {
  const auto known = kiln_dtype(dtype);
  if (known != kiln_python::DType::other) return kiln_python::dtype_name(known);
  const std::pair<int32_t, const char*> others[] = {
      {aoti_torch_dtype_float64(), "torch.float64"}, {aoti_torch_dtype_int64(), "torch.int64"},
      {aoti_torch_dtype_int16(), "torch.int16"},     {aoti_torch_dtype_uint8(), "torch.uint8"},
      {aoti_torch_dtype_bool(), "torch.bool"},       {aoti_torch_dtype_float8_e5m2(), "torch.float8_e5m2"}};
  for (const auto& [code, name] : others)
    if (code == dtype) return name;
  return "torch dtype " + std::to_string(dtype);
}

kiln_python::TensorFacts facts_of(const Tensor& t) {
  kiln_python::TensorFacts f;
  const int32_t dtype = dtype_of(t);
  f.dtype = kiln_dtype(dtype);
  f.dtype_name = dtype_text(dtype);
  int32_t type = 0, index = 0, layout = 0;
  check(aoti_torch_get_device_type(t.get(), &type), "aoti_torch_get_device_type");
  check(aoti_torch_get_device_index(t.get(), &index), "aoti_torch_get_device_index");
  check(aoti_torch_get_layout(t.get(), &layout), "aoti_torch_get_layout");
  f.cuda = type == aoti_torch_device_type_cuda();
  f.meta = type == aoti_torch_device_type_meta();
  f.device = f.cuda ? "cuda:" + std::to_string(index) : f.meta ? "meta" : type == aoti_torch_device_type_cpu() ? "cpu"
                                                                                                               : "device type " + std::to_string(type);
  f.strided = layout == aoti_torch_layout_strided();
  int64_t dim = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  check(aoti_torch_get_dim(t.get(), &dim), "aoti_torch_get_dim");
  if (f.strided) {
    check(aoti_torch_get_sizes(t.get(), &sizes), "aoti_torch_get_sizes");
    check(aoti_torch_get_strides(t.get(), &strides), "aoti_torch_get_strides");
    f.sizes.assign(sizes, sizes + dim);
    f.strides.assign(strides, strides + dim);
  }
  f.element_size = static_cast<std::int64_t>(t.element_size());
  if (f.cuda) {
    f.address = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(t.data_ptr()));
  } else {
    int64_t offset = 0;
    check(aoti_torch_get_storage_offset(t.get(), &offset), "aoti_torch_get_storage_offset");
    f.address = offset * f.element_size;
  }
  return f;
}

Tensor empty(const std::vector<std::int64_t>& shape, int32_t dtype, int32_t device) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size() - 1; i-- > 0 && !shape.empty();) strides[i] = strides[i + 1] * shape[i + 1];
  AtenTensorHandle made = nullptr;
  check(aoti_torch_empty_strided(static_cast<int64_t>(shape.size()), shape.data(), strides.data(), dtype,
                                 aoti_torch_device_type_cuda(), device, &made),
        "aoti_torch_empty_strided");
  return Tensor(made);
}

// The scales as the plan lays them out: a flat allocation (padding included) and a view of it.
Tensor empty_scales(const kiln_python::ScaleGeometry& g, int32_t device) {
  if (!g.view) return empty(g.shape, aoti_torch_dtype_float32(), device);
  Tensor storage = empty({g.storage}, g.packed ? aoti_torch_dtype_int32() : aoti_torch_dtype_float32(), device);
  AtenTensorHandle view = nullptr;
  check(aoti_torch__reinterpret_tensor(storage.get(), static_cast<int64_t>(g.shape.size()), g.shape.data(),
                                       g.strides.data(), 0, &view),
        "aoti_torch__reinterpret_tensor");
  return Tensor(view);
}

// The shared body: checks (a refusal names its argument), outputs, launch on PyTorch's current
// stream of x's device. Returns (q, scales).
std::tuple<Tensor, Tensor> run(const Tensor& x, const std::optional<Tensor>& out_q, int64_t group_size, double eps,
                               const std::string& output, const std::string& layout, bool use_ue8m0,
                               bool silu_and_mul, bool batched, const std::optional<Tensor>& masked_m) {
  const kiln_python::TensorFacts xf = facts_of(x);
  const kiln_python::Plan p =
      kiln_python::plan(xf, out_q ? std::optional(facts_of(*out_q)) : std::nullopt,
                        masked_m ? std::optional(facts_of(*masked_m)) : std::nullopt,
                        {group_size, eps, output, layout, use_ue8m0, silu_and_mul, batched});
  // Why x must be CUDA here: Meta runs the fake, so only another backend (the CPU) gets this far.
  if (!xf.cuda) throw kiln_python::ArgumentError(false, "x: expected a CUDA tensor, got one on " + xf.device);
  const int32_t device = x.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  Tensor q = out_q ? *out_q
                   : empty(p.q_shape, p.q_dtype == kiln_python::DType::int8 ? aoti_torch_dtype_int8()
                                                                             : aoti_torch_dtype_float8_e4m3fn(),
                           device);
  Tensor scales = empty_scales(p.scales, device);
  if (p.empty()) return {q, scales};
  kiln::ops::QuantArgs args;
  args.x = x.data_ptr();
  args.q = q.data_ptr();
  args.scales = scales.data_ptr();
  args.m = p.m;
  args.k = p.k;
  args.x_row_stride = p.x_row_stride;
  args.eps = p.eps;
  args.experts = p.batched ? p.experts : 0;
  args.x_expert_stride = p.x_expert_stride;
  args.masked_m = masked_m ? static_cast<const std::int32_t*>(masked_m->data_ptr()) : nullptr;
  check(aoti_torch_get_current_cuda_stream(device, &args.stream), "aoti_torch_get_current_cuda_stream");
  kiln_python::quantize(device, p.variant, args);
  return {q, scales};
}

std::tuple<Tensor, Tensor> per_token_group_quant(Tensor x, int64_t group_size, double eps, std::string output,
                                                 std::string layout, bool use_ue8m0, bool silu_and_mul, bool batched,
                                                 std::optional<Tensor> masked_m) {
  return run(x, std::nullopt, group_size, eps, output, layout, use_ue8m0, silu_and_mul, batched, masked_m);
}

Tensor per_token_group_quant_out(Tensor x, Tensor out_q, int64_t group_size, double eps, std::string output,
                                 std::string layout, bool use_ue8m0, bool silu_and_mul, bool batched,
                                 std::optional<Tensor> masked_m) {
  return std::get<1>(run(x, out_q, group_size, eps, output, layout, use_ue8m0, silu_and_mul, batched, masked_m));
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(kiln, CompositeExplicitAutograd, m) {
  m.impl("per_token_group_quant", TORCH_BOX(&per_token_group_quant));
  m.impl("per_token_group_quant_out", TORCH_BOX(&per_token_group_quant_out));
}

// Why a Python module at all: importing it (kiln._torch_ops does, after defining the ops) is what
// loads it, with the package's own library paths; the module itself holds nothing.
PyMODINIT_FUNC PyInit__kiln_ops() {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kiln_ops",
                               "The kernels of torch.ops.kiln.* (use the package, not this module)", -1, nullptr,
                               nullptr, nullptr, nullptr, nullptr};
  return PyModule_Create(&module);
}

// kiln._kiln: the extension under the Python package. Thin: the process's Service per device and
// the quantizer call live in libkiln_python (quant_call.hpp), which kiln._kiln_ops (the torch op)
// shares, so both load each module once and count in one set of counters. This module adds what
// Python needs without torch: the variant struct, warm, the counters, and `plan`, the op's checks
// and output geometry for its fake implementation (python/kiln/_torch_ops.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/counters.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/service.hpp"
#include "kiln/version.hpp"
#include "quant_call.hpp"

namespace py = pybind11;
using kiln::ops::QuantArgs;
using kiln::ops::QuantInput;
using kiln::ops::QuantOutput;
using kiln::ops::QuantVariant;
using kiln_python::service;
using ScaleLayout = kiln::ops::QuantScales;

namespace {

void* pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

std::uint64_t extent(const char* name, std::int64_t value) {
  if (value < 0) kiln::throw_invalid_argument(name, "a size >= 0", std::to_string(value));
  return static_cast<std::uint64_t>(value);
}

struct InvalidArgument {
  std::string message;
};

// Why a Python ValueError: every refusal the library words as an invalid argument is about what
// the caller passed; the rest (no kernel, a driver failure) stays a RuntimeError.
template <class Body>
auto invalid_as_value_error(Body&& body) {
  try {
    return body();
  } catch (const kiln::Error& error) {
    if (kiln_python::is_invalid_argument(error.what())) throw InvalidArgument{error.what()};
    throw;
  }
}

// A tensor as _torch_ops._facts describes it: (str(dtype), str(device), strided, shape, strides,
// data address or storage offset in bytes, element size).
using Facts = std::tuple<std::string, std::string, bool, std::vector<std::int64_t>, std::vector<std::int64_t>,
                         std::int64_t, std::int64_t>;

kiln_python::TensorFacts facts_of(const Facts& f) {
  using kiln_python::DType;
  kiln_python::TensorFacts t;
  t.dtype_name = std::get<0>(f);
  static const std::pair<const char*, DType> names[] = {
      {"torch.bfloat16", DType::bf16}, {"torch.float16", DType::fp16}, {"torch.float32", DType::fp32},
      {"torch.float8_e4m3fn", DType::e4m3}, {"torch.int8", DType::int8}, {"torch.int32", DType::int32}};
  for (const auto& [name, dtype] : names)
    if (t.dtype_name == name) t.dtype = dtype;
  t.device = std::get<1>(f);
  t.cuda = t.device.rfind("cuda", 0) == 0;
  t.meta = t.device == "meta";
  t.strided = std::get<2>(f);
  t.sizes = std::get<3>(f);
  t.strides = std::get<4>(f);
  t.address = std::get<5>(f);
  t.element_size = std::get<6>(f);
  return t;
}

// (q shape, q dtype name, scales storage elements, scales shape, scales strides, scales dtype name,
// whether the scales are a view of that storage)
py::tuple plan(const Facts& x, const std::optional<Facts>& out_q, const std::optional<Facts>& masked_m,
               std::int64_t group_size, double eps, const std::string& output, const std::string& layout, bool ue8m0,
               bool silu_and_mul, bool batched) {
  std::optional<kiln_python::TensorFacts> qf, mf;
  if (out_q) qf = facts_of(*out_q);
  if (masked_m) mf = facts_of(*masked_m);
  const kiln_python::Plan p =
      kiln_python::plan(facts_of(x), qf, mf, {group_size, eps, output, layout, ue8m0, silu_and_mul, batched});
  return py::make_tuple(p.q_shape, kiln_python::dtype_name(p.q_dtype), p.scales.storage, p.scales.shape,
                        p.scales.strides, p.scales.packed ? "torch.int32" : "torch.float32", p.scales.view);
}

// The names and order of kiln::for_each_counter, as `kiln info --json` reports them.
template <class Counters>
py::dict counter_dict(const Counters& counters) {
  py::dict out;
  for_each_counter(counters, [&](const char* name, auto value) { out[name] = value; });
  return out;
}

py::dict counters(int device) {
  const kiln::ServiceCounters c = service(device).counters();
  py::dict all;
  all["memory"] = counter_dict(c.memory);
  all["disk"] = counter_dict(c.disk);
  all["remote"] = counter_dict(c.remote);
  return all;
}

}  // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln's C++ API for the kiln Python package (use the package, not this module)";

  py::register_exception_translator([](std::exception_ptr raised) {
    try {
      if (raised) std::rethrow_exception(raised);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.message.c_str());
    } catch (const kiln_python::ArgumentError& e) {
      PyErr_SetString(e.type_error ? PyExc_TypeError : PyExc_ValueError, e.what());
    }
  });

  py::enum_<QuantInput>(m, "QuantInput")
      .value("bf16", QuantInput::bf16).value("fp16", QuantInput::fp16).value("fp32", QuantInput::fp32);
  py::enum_<QuantOutput>(m, "QuantOutput").value("e4m3", QuantOutput::e4m3).value("int8", QuantOutput::int8);
  py::enum_<ScaleLayout>(m, "ScaleLayout")
      .value("row_major", ScaleLayout::row_major)
      .value("column_major", ScaleLayout::column_major)
      .value("column_major_tma", ScaleLayout::column_major_tma)
      .value("ue8m0_packed", ScaleLayout::ue8m0_packed);
  py::class_<QuantVariant>(m, "QuantVariant")
      .def(py::init([](QuantInput input, int group, QuantOutput output, ScaleLayout scales, bool ue8m0,
                       bool silu_and_mul) {
             return QuantVariant{input, static_cast<std::uint32_t>(extent("group", group)), output, scales, ue8m0,
                                 silu_and_mul};
           }),
           py::arg("input"), py::arg("group"), py::arg("output"), py::arg("scales"), py::arg("ue8m0"),
           py::arg("silu_and_mul"))
      .def("__str__", [](const QuantVariant& v) { return v.refusal().empty() ? v.module_name() : v.description(); })
      .def("__repr__", [](const QuantVariant& v) { return "QuantVariant(" + v.description() + ")"; });

  m.def("version", [] { return std::string(kiln::version_string()); });
  m.def(
      "quantize",
      [](int device, const QuantVariant& variant, std::uintptr_t x, std::uintptr_t q, std::uintptr_t scales,
         std::int64_t rows, std::int64_t k, std::int64_t x_row_stride, float eps, std::uintptr_t stream) {
        invalid_as_value_error([&] {
          QuantArgs args;
          args.x = pointer(x);
          args.q = pointer(q);
          args.scales = pointer(scales);
          args.m = extent("m", rows);
          args.k = extent("k", k);
          args.x_row_stride = extent("x_row_stride", x_row_stride);
          args.eps = eps;
          args.stream = pointer(stream);
          kiln_python::quantize(device, variant, args);
        });
      },
      // Why without the GIL: the first call of a variant on a device may compile for a while.
      py::call_guard<py::gil_scoped_release>(), py::arg("device"), py::arg("variant"), py::arg("x"), py::arg("q"),
      py::arg("scales"), py::arg("m"), py::arg("k"), py::arg("x_row_stride"), py::arg("eps"), py::arg("stream"));
  m.def(
      "warm",
      [](int device, const QuantVariant& variant, bool batched) {
        return invalid_as_value_error([&] {
          kiln::Service& s = service(device);
          const kiln::ops::GroupQuant quant = s.group_quant(variant);
          return batched ? quant.prepare_batched(s.gpu()) : quant.prepare(s.gpu());
        });
      },
      py::call_guard<py::gil_scoped_release>(), py::arg("device"), py::arg("variant"), py::arg("batched") = false);
  m.def(
      "availability",
      [](int device) {
        kiln::Service& s = service(device);
        return py::make_tuple(s.available(), s.unavailable_reason());
      },
      py::arg("device"));
  m.def("counters", &counters, py::arg("device"));
  m.def("used_devices", &kiln_python::used_devices);
  m.def("is_invalid_argument", [](const std::string& message) { return kiln_python::is_invalid_argument(message); },
        py::arg("message"), "Whether a library error's message is the caller's fault (a ValueError).");
  m.def("plan", &plan, py::arg("x"), py::arg("out_q"), py::arg("masked_m"), py::arg("group_size"), py::arg("eps"),
        py::arg("output"), py::arg("layout"), py::arg("use_ue8m0"), py::arg("silu_and_mul"), py::arg("batched"),
        "The op's checks and outputs for tensors described by their facts (python/kiln/_torch_ops.py).");
}

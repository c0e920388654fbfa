// kiln._kiln: the extension under the Python package. Thin: one Service per device, created on
// first use and kept for the process; the quantizer call takes one variant struct and raw device
// pointers (the Python side owns tensors, streams and checks of shapes and dtypes) and goes to
// the library's one family entry point, Service::group_quant (kiln/ops/group_quant.hpp). The same
// call is exported to kiln._kiln_torch as a capsule (quant_entry.hpp).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "kiln/counters.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/group_quant.hpp"
#include "kiln/service.hpp"
#include "kiln/version.hpp"
#include "quant_entry.hpp"

namespace py = pybind11;
using kiln::ops::QuantArgs;
using kiln::ops::QuantInput;
using kiln::ops::QuantOutput;
using kiln::ops::QuantVariant;
using ScaleLayout = kiln::ops::QuantScales;

namespace {

// Why kept for the process: a Service owns the device's loaded modules; making one per call would
// load them again each time.
std::mutex services_mutex;
// Why never destroyed: at interpreter exit PyTorch and the driver may already be torn down, and a
// Service's destructor unloads modules and releases the primary context; the process end frees all.
auto& services = *new std::map<int, std::unique_ptr<kiln::Service>>();

kiln::Service& service(int device) {
  const std::lock_guard<std::mutex> lock(services_mutex);
  auto& slot = services[device];
  if (!slot) slot = std::make_unique<kiln::Service>(device);
  return *slot;
}

void* pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

std::uint64_t extent(const char* name, std::int64_t value) {
  if (value < 0) kiln::throw_invalid_argument(name, "a size >= 0", std::to_string(value));
  return static_cast<std::uint64_t>(value);
}

// Why a Python ValueError: every refusal the library words as an invalid argument is about what
// the caller passed; the rest (no kernel, a driver failure) stays a RuntimeError.
bool is_invalid_argument(const std::string& what) {
  return what.rfind("invalid argument", 0) == 0 || what.rfind("impossible variant", 0) == 0;
}

struct InvalidArgument {
  std::string message;
};

template <class Body>
auto invalid_as_value_error(Body&& body) {
  try {
    return body();
  } catch (const kiln::Error& error) {
    if (is_invalid_argument(error.what())) throw InvalidArgument{error.what()};
    throw;
  }
}

void quantize(int device, const QuantVariant& variant, const QuantArgs& args) {
  kiln::Service& s = service(device);
  kiln::ops::GroupQuant::check(variant, args);
  const kiln::ops::GroupQuant quant = s.group_quant(variant);
  if (!quant.available() && args.m != 0 && args.k != 0)
    kiln::throw_error("kiln: variant " + variant.module_name() + " is not available on cuda:" + std::to_string(device) +
                      " (" +
                      (s.unavailable_reason().empty() ? "it did not compile or load; see the log"
                                                      : s.unavailable_reason()) +
                      ")");
  quant.launch(s.gpu(), args);
}

kiln_python::QuantStatus quantize_entry(int device, const QuantVariant& variant, const QuantArgs& args,
                                        const char** message) noexcept {
  thread_local std::string failure;
  auto status = kiln_python::QuantStatus::failed;
  try {
    quantize(device, variant, args);
    return kiln_python::QuantStatus::ok;
  } catch (const kiln::Error& error) {
    failure = error.what();
    if (is_invalid_argument(failure)) status = kiln_python::QuantStatus::invalid_argument;
  } catch (const std::exception& error) {
    failure = error.what();
  } catch (...) {
    failure = "kiln: unknown failure in quantize";
  }
  *message = failure.c_str();
  return status;
}

// Why static: the capsule hands out its address for the life of the process.
const kiln_python::QuantEntry quant_entry{kiln_python::quant_entry_version, &quantize_entry};

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

  m.add_object("_quant_entry", py::capsule(&quant_entry, kiln_python::quant_entry_capsule));
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
          quantize(device, variant, args);
        });
      },
      // Why without the GIL: the first call of a variant on a device may compile for a while.
      py::call_guard<py::gil_scoped_release>(), py::arg("device"), py::arg("variant"), py::arg("x"), py::arg("q"),
      py::arg("scales"), py::arg("m"), py::arg("k"), py::arg("x_row_stride"), py::arg("eps"), py::arg("stream"));
  m.def(
      "warm",
      [](int device, const QuantVariant& variant) {
        return invalid_as_value_error([&] {
          kiln::Service& s = service(device);
          return s.group_quant(variant).prepare(s.gpu());
        });
      },
      py::call_guard<py::gil_scoped_release>(), py::arg("device"), py::arg("variant"));
  m.def(
      "availability",
      [](int device) {
        kiln::Service& s = service(device);
        return py::make_tuple(s.available(), s.unavailable_reason());
      },
      py::arg("device"));
  m.def("counters", &counters, py::arg("device"));
  m.def("used_devices", [] {
    const std::lock_guard<std::mutex> lock(services_mutex);
    py::list used;
    for (const auto& [device, made] : services)
      if (made) used.append(device);
    return used;
  });
}

// libkiln_python (quant_call.hpp).
#include "quant_call.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "kiln/error.hpp"

namespace kiln_python {

using kiln::ops::QuantInput;
using kiln::ops::QuantOutput;
using kiln::ops::QuantScales;
using kiln::ops::QuantVariant;

namespace {

std::mutex services_mutex;
auto& services = *new std::map<int, std::unique_ptr<kiln::Service>>();

// The family's kernels move x and q in 16-byte vectors; the allocators give 256-byte aligned
// buffers, so only a view's storage offset or row stride can break it.
constexpr std::int64_t alignment = 16;

[[noreturn]] void refuse(bool type_error, const std::string& message) { throw ArgumentError(type_error, message); }
[[noreturn]] void value_error(const std::string& message) { refuse(false, message); }

// A Python tuple's repr: "(4, 256)", "(4,)", "()".
std::string tuple(const std::vector<std::int64_t>& values) {
  std::string out = "(";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + (values.size() == 1 ? ",)" : ")");
}

std::string hex(std::int64_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value;
  return out.str();
}

void check_alignment(const char* name, std::int64_t address) {
  if (address % alignment)
    value_error(std::string(name) + ": expected data 16-byte aligned, got address " + hex(address) +
                " (a view whose storage offset is not a multiple of 16 bytes)");
}

bool contiguous(const TensorFacts& t) {
  std::int64_t expected = 1;
  for (std::size_t i = t.sizes.size(); i-- > 0;) {
    if (t.sizes[i] == 0) return true;
    if (t.sizes[i] == 1) continue;
    if (t.strides[i] != expected) return false;
    expected *= t.sizes[i];
  }
  return true;
}

std::int64_t product(const std::vector<std::int64_t>& values, std::size_t begin, std::size_t end) {
  std::int64_t p = 1;
  for (std::size_t i = begin; i < end; ++i) p *= values[i];
  return p;
}

// The stride of x's rows when its leading dimensions collapse into one (as x.view(-1, H) would),
// or -1.
std::int64_t collapsed_row_stride(const TensorFacts& x) {
  std::int64_t stride = -1, expected = 0;
  for (std::size_t i = x.sizes.size() - 1; i-- > 0;) {
    if (x.sizes[i] == 1) continue;
    if (stride >= 0 && x.strides[i] != expected) return -1;
    if (stride < 0) stride = x.strides[i];
    expected = x.strides[i] * x.sizes[i];
  }
  return stride;
}

// `unit` is "row" or "expert".
std::string overlap_message(const std::string& unit, std::int64_t least, std::int64_t got, const TensorFacts& x) {
  return "x: expected " + unit + "s that do not overlap (" + (unit == "row" ? "a " : "an ") + unit +
         " stride of at least " + std::to_string(least) + " elements), got " + unit + " stride " + std::to_string(got) +
         " (shape " + tuple(x.sizes) + ", strides " + tuple(x.strides) + ", e.g. from expand()); call .contiguous() first";
}

QuantVariant variant_of(const CallFlags& f, QuantInput input) {
  QuantVariant v;
  v.input = input;
  if (f.output == "e4m3") {
    v.output = QuantOutput::e4m3;
  } else if (f.output == "int8") {
    v.output = QuantOutput::int8;
  } else {
    value_error("output: expected one of ('e4m3', 'int8'), got '" + std::string(f.output) + "'");
  }
  if (f.layout == "row_major") {
    v.scales = QuantScales::row_major;
  } else if (f.layout == "column_major") {
    v.scales = QuantScales::column_major;
  } else if (f.layout == "column_major_tma") {
    v.scales = QuantScales::column_major_tma;
  } else if (f.layout == "ue8m0_packed") {
    v.scales = QuantScales::ue8m0_packed;
  } else {
    value_error("layout: expected one of ('row_major', 'column_major', 'column_major_tma', 'ue8m0_packed'), got '" +
                std::string(f.layout) + "'");
  }
  if (f.group_size != 32 && f.group_size != 64 && f.group_size != 128)
    value_error("group_size: expected one of (32, 64, 128), got " + std::to_string(f.group_size));
  v.group = static_cast<std::uint32_t>(f.group_size);
  if (v.output == QuantOutput::int8 && f.ue8m0)
    value_error("use_ue8m0: int8 output takes fp32 scales (absmax / 127); UE8M0 scales exist only for "
                "per_token_group_quant_fp8");
  v.ue8m0 = f.ue8m0;
  v.silu_and_mul = f.silu_and_mul;
  if (const std::string refusal = v.refusal(); !refusal.empty()) value_error(refusal);
  return v;
}

QuantInput input_of(const TensorFacts& x) {
  switch (x.dtype) {
    case DType::bf16: return QuantInput::bf16;
    case DType::fp16: return QuantInput::fp16;
    case DType::fp32: return QuantInput::fp32;
    default: refuse(true, "x: expected dtype bfloat16, float16 or float32, got " + x.dtype_name);
  }
}

// x's rows and strides into `p`: one matrix of M rows (x's leading dimensions), or a batch.
void check_x(const TensorFacts& x, const CallFlags& f, Plan& p) {
  if (!x.strided || !(x.cuda || x.meta)) value_error("x: expected a CUDA tensor, got one on " + x.device);
  const auto& shape = x.sizes;
  if (shape.empty()) value_error("x: expected at least one dimension (..., K), got a 0-d tensor");
  if (f.batched && shape.size() != 3)
    value_error("x: batched takes x = (experts, M, K), a 3-d tensor, got shape " + tuple(shape));
  if (!f.batched && p.variant.scales != QuantScales::row_major && shape.size() != 2)
    value_error("x: column-major scales (" + std::string(f.layout) + ") need a 2-d x (M, K), got shape " + tuple(shape));
  const std::int64_t columns = shape.back();
  std::int64_t k = columns;
  if (f.silu_and_mul) {
    if (columns % 2)
      value_error("x: fuse_silu_and_mul takes x = [gate, up] with an even last dimension (2K), got " +
                  std::to_string(columns));
    k /= 2;
  }
  if (k % f.group_size)
    value_error("x: the last dimension (K = " + std::to_string(k) +
                (f.silu_and_mul ? " after halving for fuse_silu_and_mul" : "") +
                ") must be a multiple of group_size = " + std::to_string(f.group_size));
  if (columns > 1 && x.strides.back() != 1)
    value_error("x: expected a contiguous last dimension (stride 1), got strides " + tuple(x.strides));
  check_alignment("x", x.address);
  p.k = static_cast<std::uint64_t>(k);
  const bool dense = contiguous(x);
  if (f.batched) {
    const std::int64_t experts = shape[0], rows = shape[1];
    p.experts = static_cast<std::uint64_t>(experts);
    p.m = static_cast<std::uint64_t>(rows);
    if (dense) return;
    const std::int64_t row_stride = rows > 1 ? x.strides[1] : columns;
    if (row_stride < columns) value_error(overlap_message("row", columns, row_stride, x));
    check_alignment("x rows", row_stride * x.element_size);
    const std::int64_t expert_stride = experts > 1 ? x.strides[0] : rows * row_stride;
    if (expert_stride < rows * row_stride) value_error(overlap_message("expert", rows * row_stride, expert_stride, x));
    check_alignment("x experts", expert_stride * x.element_size);
    p.x_row_stride = static_cast<std::uint64_t>(row_stride);
    p.x_expert_stride = static_cast<std::uint64_t>(expert_stride);
    return;
  }
  const std::int64_t m = product(shape, 0, shape.size() - 1);
  p.m = static_cast<std::uint64_t>(m);
  if (m <= 1 || dense) return;
  const std::int64_t stride = collapsed_row_stride(x);
  if (stride < 0)
    value_error("x: expected leading dimensions that collapse into rows of one stride, got shape " + tuple(shape) +
                " with strides " + tuple(x.strides));
  // Why: the library reads a row stride of 0 as dense, so the rows of an expand()ed x (stride 0)
  // would be read as M distinct rows from a buffer that holds one.
  if (stride < columns) value_error(overlap_message("row", columns, stride, x));
  check_alignment("x rows", stride * x.element_size);
  p.x_row_stride = static_cast<std::uint64_t>(stride);
}

void check_out_q(const TensorFacts& out_q, const TensorFacts& x, const Plan& p) {
  if (out_q.dtype != p.q_dtype)
    refuse(true, std::string("out_q: expected dtype ") + dtype_name(p.q_dtype) + ", got " + out_q.dtype_name);
  if (out_q.sizes != p.q_shape)
    value_error("out_q: expected shape " + tuple(p.q_shape) + ", got " + tuple(out_q.sizes));
  if (out_q.device != x.device)
    value_error("out_q: expected a tensor on " + x.device + " (x's device), got one on " + out_q.device);
  if (!out_q.strided || !contiguous(out_q))
    value_error("out_q: expected a contiguous tensor, got strides " + tuple(out_q.strides));
  check_alignment("out_q", out_q.address);
}

void check_masked_m(const TensorFacts& masked_m, const TensorFacts& x, const Plan& p) {
  if (!p.batched)
    value_error("masked_m: takes a batch of experts (batched=True, x = (experts, M, K)), got batched=False");
  if (masked_m.dtype != DType::int32)
    refuse(true, "masked_m: expected dtype torch.int32, got " + masked_m.dtype_name);
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(p.experts)};
  if (masked_m.sizes != shape)
    value_error("masked_m: expected shape " + tuple(shape) + " (one row count per expert), got " +
                tuple(masked_m.sizes));
  if (masked_m.device != x.device)
    value_error("masked_m: expected a tensor on " + x.device + " (x's device), got one on " + masked_m.device);
  if (!masked_m.strided || !contiguous(masked_m))
    value_error("masked_m: expected a contiguous tensor, got strides " + tuple(masked_m.strides));
}

}  // namespace

kiln::Service& service(int device) {
  const std::lock_guard<std::mutex> lock(services_mutex);
  auto& slot = services[device];
  if (!slot) slot = std::make_unique<kiln::Service>(device);
  return *slot;
}

std::vector<int> used_devices() {
  const std::lock_guard<std::mutex> lock(services_mutex);
  std::vector<int> used;
  for (const auto& [device, made] : services)
    if (made) used.push_back(device);
  return used;
}

bool is_invalid_argument(std::string_view message) {
  return message.rfind("invalid argument", 0) == 0 || message.rfind("impossible variant", 0) == 0;
}

void quantize(int device, const QuantVariant& variant, const kiln::ops::QuantArgs& args) {
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

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bf16: return "torch.bfloat16";
    case DType::fp16: return "torch.float16";
    case DType::fp32: return "torch.float32";
    case DType::e4m3: return "torch.float8_e4m3fn";
    case DType::int8: return "torch.int8";
    case DType::int32: return "torch.int32";
    case DType::other: break;
  }
  return "another dtype";
}

ScaleGeometry scale_geometry(const QuantVariant& v, const std::vector<std::int64_t>& lead, std::int64_t k,
                             bool batched) {
  const std::int64_t groups = k / v.group;
  ScaleGeometry g;
  std::uint64_t bytes = 0;
  if (v.scales == QuantScales::row_major) {
    g.shape = lead;
    g.shape.push_back(groups);
    g.strides.assign(g.shape.size(), 1);
    for (std::size_t i = g.shape.size() - 1; i-- > 0;) g.strides[i] = g.strides[i + 1] * g.shape[i + 1];
    g.storage = product(g.shape, 0, g.shape.size());
  } else {
    const std::int64_t experts = batched ? lead[0] : 1, m = lead.back();
    // Why M padded for TMA: DeepGEMM reads whole boxes, so the padding rows stay allocated.
    const std::int64_t padded = v.scales == QuantScales::column_major ? m : (m + 3) / 4 * 4;
    g.packed = v.scales == QuantScales::ue8m0_packed;
    g.view = true;
    const std::int64_t columns = g.packed ? (groups + 3) / 4 : groups;
    g.storage = experts * columns * padded;
    g.shape = {m, columns};
    g.strides = {1, padded};
    if (batched) {
      g.shape.insert(g.shape.begin(), experts);
      g.strides.insert(g.strides.begin(), columns * padded);
    }
  }
  const auto rows = static_cast<std::uint64_t>(batched ? lead[1] : product(lead, 0, lead.size()));
  const auto experts = static_cast<std::uint64_t>(batched ? lead[0] : 0);
  // Why: quant_scales_bytes is what the kernels write; a batch of no experts has no scales.
  if (!(batched && experts == 0)) bytes = kiln::ops::quant_scales_bytes(v, rows, static_cast<std::uint64_t>(k), experts);
  if (bytes != static_cast<std::uint64_t>(g.storage) * 4)
    throw std::logic_error("kiln: the scales' geometry (" + std::to_string(g.storage * 4) +
                           " bytes) disagrees with quant_scales_bytes (" + std::to_string(bytes) + ")");
  return g;
}

Plan plan(const TensorFacts& x, const std::optional<TensorFacts>& out_q, const std::optional<TensorFacts>& masked_m,
          const CallFlags& flags) {
  Plan p;
  p.batched = flags.batched;
  // Why bf16 first: the flags are checked before x, as the public functions check them.
  p.variant = variant_of(flags, QuantInput::bf16);
  // Why the upper bound: converting a double beyond float's range is undefined behaviour.
  if (!(flags.eps >= 0 && flags.eps <= std::numeric_limits<float>::max())) {
    std::ostringstream got;
    got << flags.eps;
    value_error("eps: expected a float in 0 <= eps <= 3.4028234663852886e+38 (the largest float32), got " + got.str());
  }
  p.eps = static_cast<float>(flags.eps);
  p.variant.input = input_of(x);
  check_x(x, flags, p);
  p.q_shape = x.sizes;
  p.q_shape.back() = static_cast<std::int64_t>(p.k);
  p.q_dtype = p.variant.output == QuantOutput::int8 ? DType::int8 : DType::e4m3;
  std::vector<std::int64_t> lead;
  if (flags.batched || p.variant.scales == QuantScales::row_major)
    lead.assign(x.sizes.begin(), x.sizes.end() - 1);
  else
    lead = {static_cast<std::int64_t>(p.m)};
  try {
    p.scales = scale_geometry(p.variant, lead, static_cast<std::int64_t>(p.k), flags.batched);
  } catch (const kiln::Error& error) {
    value_error(error.what());
  }
  if (out_q) check_out_q(*out_q, x, p);
  if (masked_m) check_masked_m(*masked_m, x, p);
  return p;
}

}  // namespace kiln_python

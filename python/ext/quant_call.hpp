#pragma once
// One quantizer call from Python: the variant as one struct, the buffers as another, one C++ call.
//
// Why these types live here: they mirror the planned C++ family API of issue 15
// (kiln::ops::QuantVariant / QuantArgs), which is not in the library yet. When it lands, this
// header goes and `quantize` forwards the two structs to the library's one entry point unchanged.
#include <cstdint>
#include <string>

namespace kiln {
class Service;
}

namespace kiln::python {

enum class QuantInput { bf16, fp16, fp32 };
enum class QuantOutput { e4m3, int8 };
enum class ScaleLayout { row_major, column_major, column_major_tma, ue8m0_packed };

struct QuantVariant {
  QuantInput input = QuantInput::bf16;
  int group = 128;  ///< 32, 64 or 128
  QuantOutput output = QuantOutput::e4m3;
  ScaleLayout scales = ScaleLayout::row_major;
  bool ue8m0 = false;         ///< scales rounded up to a power of two
  bool silu_and_mul = false;  ///< x is [M, 2K]: quantize silu(x[:, :K]) * x[:, K:]
};

struct QuantArgs {
  const void* x = nullptr;
  void* q = nullptr;
  void* scales = nullptr;
  std::int64_t m = 0;
  std::int64_t k = 0;             ///< output columns
  std::int64_t x_row_stride = 0;  ///< elements; 0 = dense
  float eps = 1e-10f;
  void* stream = nullptr;  ///< CUstream
};

/// "bf16/g128/e4m3/row_major": how errors and `kiln.warm` name a variant.
std::string to_string(const QuantVariant& variant);

/// Thrown for a variant the library cannot launch yet; the module maps it to NotImplementedError.
struct VariantNotImplemented {
  std::string message;
};

/// Launch `variant` over `args` on `service`'s device. Throws kiln::Error for what the library
/// refuses, VariantNotImplemented for a variant it does not have.
void quantize(Service& service, const QuantVariant& variant, const QuantArgs& args);

/// Load `variant`'s kernels on `service`'s device (compile or disk cache), so a later launch,
/// e.g. inside a CUDA graph capture, loads nothing. Returns whether a kernel is there.
bool warm(Service& service, const QuantVariant& variant);

}  // namespace kiln::python

#pragma once
// libkiln_python: what kiln._kiln (pybind11) and kiln._kiln_ops (the torch op on PyTorch's stable
// ABI) share, so that both work the same way:
//  - one Service per device for the process, so both load each module once and count in one set
//    of counters (kiln.cache_stats());
//  - one plan of a quantizer call from the tensors' metadata: every check of the op's arguments
//    (each error naming its argument) and the shapes, strides and dtypes of q and the scales. The
//    op runs it on real tensors, the op's fake implementation (python/kiln/_torch_ops.py) on fake
//    ones through kiln._kiln.plan.
// Nothing here touches Python or torch.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ops/group_quant.hpp"
#include "kiln/service.hpp"

#define KILN_PYTHON_API __attribute__((visibility("default")))

namespace kiln_python {

/// Device `device`'s Service, made on first use and kept for the process: never destroyed, since
/// at interpreter exit PyTorch and the driver may already be torn down.
KILN_PYTHON_API kiln::Service& service(int device);
/// The devices whose Service exists, ascending.
KILN_PYTHON_API std::vector<int> used_devices();
/// Checks `args` for `variant`, then launches on `device` (nothing for an empty call). Throws
/// kiln::Error: "invalid argument ..." or "impossible variant ..." for the caller's mistakes, the
/// variant's unavailability or a launch failure otherwise. May compile: call without the GIL.
KILN_PYTHON_API void quantize(int device, const kiln::ops::QuantVariant& variant, const kiln::ops::QuantArgs& args);
/// Whether a kiln::Error message is the caller's fault (a Python ValueError).
KILN_PYTHON_API bool is_invalid_argument(std::string_view message);

/// A refused argument of the op: its message names the argument; `type_error` picks TypeError
/// over ValueError where Python raises it.
struct KILN_PYTHON_API ArgumentError : std::invalid_argument {
  ArgumentError(bool type_error, const std::string& message) : std::invalid_argument(message), type_error(type_error) {}
  bool type_error;
};

enum class DType : std::uint8_t { bf16, fp16, fp32, e4m3, int8, int32, other };

/// What the plan reads of a tensor.
struct TensorFacts {
  DType dtype = DType::other;
  std::string dtype_name;  ///< as Python prints it: "torch.float64"
  std::string device;      ///< as Python prints it: "cuda:0", "meta", "cpu"
  bool cuda = false, meta = false, strided = true;
  std::vector<std::int64_t> sizes, strides;
  /// The data address, or for a meta or fake tensor its storage offset in bytes (kiln's
  /// allocators align allocations to 256 bytes, so only the offset can break the alignment).
  std::int64_t address = 0;
  std::int64_t element_size = 1;
};

/// The op's arguments other than tensors.
struct CallFlags {
  std::int64_t group_size = 128;
  double eps = 1e-10;
  std::string_view output = "e4m3";  ///< e4m3 or int8
  std::string_view layout = "row_major";
  bool ue8m0 = false, silu_and_mul = false, batched = false;
};

/// The scales as allocated (a flat storage of `storage` elements) and as returned (a view).
struct ScaleGeometry {
  std::int64_t storage = 0;
  std::vector<std::int64_t> shape, strides;
  bool packed = false;  ///< int32 words of four UE8M0 exponents instead of fp32
  bool view = false;    ///< a view of a larger or reordered storage (every layout but row-major)
};

/// The scales of `variant` for rows `lead` (x's leading dimensions; [E, T] of a batch) and `k`
/// output columns: row-major [..., G] contiguous; column-major an [M, G] view of [G, M] storage;
/// TMA-aligned the same over M4 = M rounded up to 4; packed an int32 [M, ceil(G/4)] view of
/// [ceil(G/4), M4]. Of a batch (`batched`, lead [E, T]), one such block per expert, E outermost.
/// Its bytes are kiln::ops::quant_scales_bytes (checked).
KILN_PYTHON_API ScaleGeometry scale_geometry(const kiln::ops::QuantVariant& variant,
                                             const std::vector<std::int64_t>& lead, std::int64_t k, bool batched);

/// One checked call.
struct Plan {
  kiln::ops::QuantVariant variant;
  float eps = 0;
  bool batched = false;
  std::uint64_t m = 0, k = 0, experts = 0;  ///< of a batch, m rows per expert
  std::uint64_t x_row_stride = 0, x_expert_stride = 0;  ///< elements, 0 = dense
  std::vector<std::int64_t> q_shape;
  DType q_dtype = DType::e4m3;
  ScaleGeometry scales;
  /// Nothing to launch.
  bool empty() const noexcept { return m == 0 || k == 0 || (batched && experts == 0); }
};

/// Checks x, out_q (optional), masked_m (optional) and the flags as the op takes them; throws
/// ArgumentError naming the first argument it refuses.
KILN_PYTHON_API Plan plan(const TensorFacts& x, const std::optional<TensorFacts>& out_q,
                          const std::optional<TensorFacts>& masked_m, const CallFlags& flags);

/// "torch.float8_e4m3fn" and the like, for messages.
KILN_PYTHON_API const char* dtype_name(DType dtype);

}  // namespace kiln_python

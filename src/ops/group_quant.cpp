#include "kiln/ops/group_quant.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "jit/variants.hpp"
#include "kiln/error.hpp"
#include "kiln/gpu_backend.hpp"
#include "kiln/ops/quant_launch_options.hpp"
#include "ops/fp8_act_quant_floor.hpp"
#include "ops/pointer_checks.hpp"
#include "ops/quant_device_rule.hpp"
#include "ops/tile_divisor.hpp"

namespace kiln::ops {

namespace {

constexpr std::uint32_t FAMILY_THREADS = 256;
constexpr std::uint64_t MAX_ROWS = 0x7FFFFFFFu;
constexpr std::uint64_t MAX_GRID_X = 0x7FFFFFFFu;
constexpr std::uint64_t MAX_GROUPS_PER_ROW = 0x7FFFFFFFu;
constexpr std::uint64_t MAX_EXPERTS = 65535;  // the batched grid's y extent

const char* spelled(QuantInput input) {
  switch (input) {
    case QuantInput::bf16: return "bf16";
    case QuantInput::fp16: return "fp16";
    case QuantInput::fp32: return "fp32";
  }
  return "?";
}

const char* spelled(QuantScales scales) {
  switch (scales) {
    case QuantScales::row_major: return "row";
    case QuantScales::column_major: return "col";
    case QuantScales::column_major_tma: return "col_tma";
    case QuantScales::ue8m0_packed: return "packed";
  }
  return "?";
}

std::uint32_t input_bytes(QuantInput input) { return input == QuantInput::fp32 ? 4 : 2; }

std::uint64_t padded_to_4(std::uint64_t m) { return (m + 3) / 4 * 4; }

std::uint64_t groups_of(const QuantVariant& variant, std::uint64_t k) { return k / variant.group; }

std::uint64_t scale_rows(const QuantVariant& variant, std::uint64_t m) {
  const bool padded = variant.scales == QuantScales::column_major_tma || variant.scales == QuantScales::ue8m0_packed;
  return padded ? padded_to_4(m) : m;
}

const Variant& jit_variant(const QuantVariant& variant) {
  // Why a thread_local memo of one: module_name() is called per resolve, and parsing walks the
  // family table; the common case asks for the same variant again.
  thread_local QuantVariant last_asked;
  thread_local Variant last;
  if (last.family == nullptr || !(last_asked == variant)) {
    last = parse_variant(std::string(QUANT_ENTRY) + " " + variant.description());
    last_asked = variant;
  }
  return last;
}

std::uint64_t dense_stride(const QuantVariant& variant, std::uint64_t k) { return variant.silu_and_mul ? 2 * k : k; }

std::uint64_t row_stride_of(const QuantVariant& variant, const QuantArgs& args) {
  return args.x_row_stride != 0 ? args.x_row_stride : dense_stride(variant, args.k);
}

// The batch fields of `args` (QuantArgs::experts and after), checked after the matrix fields.
void check_batch(const QuantVariant& variant, const QuantArgs& args) {
  if (args.experts == 0) {
    if (args.masked_m != nullptr)
      throw_invalid_argument("masked_m", "null for one matrix (experts 0), or experts from 1 to 65535 for a batch",
                             "a pointer with experts 0");
    if (args.x_expert_stride != 0)
      throw_invalid_argument("x_expert_stride", "0 for one matrix (experts 0)", std::to_string(args.x_expert_stride));
    return;
  }
  std::uint64_t dense = 0;
  if (__builtin_mul_overflow(args.m, row_stride_of(variant, args), &dense))
    throw_invalid_argument("m", "an expert whose rows fit in 2^64 elements", std::to_string(args.m));
  if (args.x_expert_stride != 0) {
    if (args.x_expert_stride < dense)
      throw_invalid_argument("x_expert_stride", "0 (dense) or at least m * the row stride (" + std::to_string(dense) +
                                                    " elements)",
                             std::to_string(args.x_expert_stride));
    if (args.x_expert_stride * input_bytes(variant.input) % 16 != 0)
      throw_invalid_argument("x_expert_stride", "an expert stride whose bytes are a multiple of 16",
                             std::to_string(args.x_expert_stride));
  }
  std::uint64_t total = 0;
  const std::uint64_t stride = args.x_expert_stride != 0 ? args.x_expert_stride : dense;
  if (__builtin_mul_overflow(stride, args.experts, &total))
    throw_invalid_argument("experts", "a batch whose x fits in 2^64 elements", std::to_string(args.experts));
  quant_scales_bytes(variant, args.m, args.k, args.experts);
  if (args.m != 0 && args.k != 0 && args.masked_m != nullptr) require_pointer("masked_m", args.masked_m, 4);
}
}  // namespace

std::string QuantVariant::description() const {
  return std::string("in=") + spelled(input) + " group=" + std::to_string(group) +
         " out=" + (output == QuantOutput::e4m3 ? "e4m3" : "int8") + " scales=" + spelled(scales) +
         " ue8m0=" + (ue8m0 ? "1" : "0") + " silu=" + (silu_and_mul ? "1" : "0");
}

std::string QuantVariant::refusal() const {
  try {
    jit_variant(*this);
    return {};
  } catch (const Error& error) {
    return error.what();
  }
}

std::string QuantVariant::module_name() const { return jit_variant(*this).name(); }

std::vector<QuantVariant> every_quant_variant() {
  std::vector<QuantVariant> all;
  for (auto input : {QuantInput::bf16, QuantInput::fp16, QuantInput::fp32})
    for (std::uint32_t group : {32u, 64u, 128u})
      for (auto output : {QuantOutput::e4m3, QuantOutput::int8})
        for (auto scales : {QuantScales::row_major, QuantScales::column_major, QuantScales::column_major_tma,
                            QuantScales::ue8m0_packed})
          for (bool ue8m0 : {false, true})
            for (bool silu : {false, true}) {
              const QuantVariant variant{input, group, output, scales, ue8m0, silu};
              if (variant.refusal().empty()) all.push_back(variant);
            }
  return all;
}

std::uint64_t quant_scales_bytes(const QuantVariant& variant, std::uint64_t m, std::uint64_t k) {
  if (const std::string refusal = variant.refusal(); !refusal.empty())
    throw_error(ErrorKind::invalid_argument, Retry::permanent, refusal);
  if (k % variant.group != 0)
    throw_invalid_argument("k", "a multiple of the group (" + std::to_string(variant.group) + ")", std::to_string(k));
  if (m > MAX_ROWS) throw_invalid_argument("m", "at most 2^31-1 rows", std::to_string(m));
  const std::uint64_t groups = groups_of(variant, k);
  const std::uint64_t columns = variant.scales == QuantScales::ue8m0_packed ? (groups + 3) / 4 : groups;
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(columns, scale_rows(variant, m), &bytes) || __builtin_mul_overflow(bytes, 4u, &bytes))
    throw_invalid_argument("k", "a shape whose scales fit in 2^64 bytes", std::to_string(k));
  return bytes;
}

std::uint64_t quant_scales_bytes(const QuantVariant& variant, std::uint64_t m, std::uint64_t k, std::uint64_t experts) {
  const std::uint64_t per_expert = quant_scales_bytes(variant, m, k);
  if (experts == 0) return per_expert;
  if (experts > MAX_EXPERTS) throw_invalid_argument("experts", "0 (one matrix) or 1 to 65535 experts", std::to_string(experts));
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(per_expert, experts, &bytes))
    throw_invalid_argument("experts", "a batch whose scales fit in 2^64 bytes", std::to_string(experts));
  return bytes;
}

std::uint32_t GroupQuant::groups_per_cta(const QuantVariant& variant) {
  const std::uint32_t elements_per_thread = 32 / input_bytes(variant.input);
  return FAMILY_THREADS / (variant.group / elements_per_thread);
}

std::uint32_t GroupQuant::items_per_slot(const QuantVariant& variant) {
  // The kernel's KILN_Q_ITEMS: with SiLU one group per slot, except where a group has two lanes
  // and the scales are not packed (KILN_Q_TWO_LANE_SILU); without SiLU two, except for 16-bit input
  // to e4m3 with fp32 scales, row- or column-major (KILN_Q_ONE_GROUP_EIGHT_CTAS).
  if (variant.silu_and_mul) {
    const bool two_lanes = FAMILY_THREADS / groups_per_cta(variant) == 2;
    return two_lanes && variant.scales != QuantScales::ue8m0_packed ? 2 : 1;
  }
  const bool fp32_scales = variant.scales != QuantScales::ue8m0_packed;
  return variant.input != QuantInput::fp32 && variant.output == QuantOutput::e4m3 && fp32_scales ? 1 : 2;
}

TileDivisor TileDivisor::of(std::uint32_t d) {
  if (d == 0 || d > max_divisor) throw_invalid_argument("d", "a divisor from 1 to 2^31-1", std::to_string(d));
  return of_valid(d);
}

std::uint32_t GroupQuant::tiles_per_row(const QuantVariant& variant, std::uint64_t k) {
  if (variant.scales == QuantScales::row_major && !variant.silu_and_mul) return 0;
  const std::uint64_t tile_groups = groups_per_cta(variant) / 4;
  const std::uint64_t groups = groups_of(variant, k);
  const std::uint64_t span = variant.scales == QuantScales::ue8m0_packed ? (groups + 3) / 4 * 4 : groups;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>((span + tile_groups - 1) / tile_groups, 0xFFFFFFFFu));
}

std::array<std::uint32_t, 3> GroupQuant::grid(const QuantVariant& variant, std::uint64_t m, std::uint64_t k,
                                              std::uint32_t items) {
  const std::uint64_t slots = groups_per_cta(variant);
  std::uint64_t ctas = (m * groups_of(variant, k) + slots * items - 1) / (slots * items);
  if (const std::uint64_t tiles = tiles_per_row(variant, k); tiles != 0) {
    // Tiles of TILE_ROWS * ITEMS rows (the kernel's constants and its TILED), over the packed
    // layout's padding rows too, a row's tiles consecutive.
    const std::uint64_t tile_rows = 4 * items;
    const std::uint64_t rows = variant.scales == QuantScales::ue8m0_packed ? padded_to_4(m) : m;
    ctas = (rows + tile_rows - 1) / tile_rows * tiles;
  }
  // Why saturate: check() compares against the grid limit, and a wrapped count would pass it.
  return {static_cast<std::uint32_t>(std::min<std::uint64_t>(ctas, 0xFFFFFFFFu)), 1, 1};
}

void GroupQuant::check(const QuantVariant& variant, const QuantArgs& args) {
  if (const std::string refusal = variant.refusal(); !refusal.empty())
    throw_error(ErrorKind::invalid_argument, Retry::permanent, refusal);
  if (args.k % variant.group != 0)
    throw_invalid_argument("k", "a multiple of the group (" + std::to_string(variant.group) + ")", std::to_string(args.k));
  if (args.m > MAX_ROWS) throw_invalid_argument("m", "at most 2^31-1 rows", std::to_string(args.m));
  if (!std::isfinite(args.eps) || args.eps < 0)
    throw_invalid_argument("eps", "a finite value >= 0 (default 1e-10)", std::to_string(args.eps));
  const std::uint64_t dense = dense_stride(variant, args.k);
  if (args.x_row_stride != 0) {
    if (args.x_row_stride < dense)
      throw_invalid_argument("x_row_stride", "0 (dense) or at least " + std::to_string(dense) + " elements",
                             std::to_string(args.x_row_stride));
    if (args.x_row_stride * input_bytes(variant.input) % 16 != 0)
      throw_invalid_argument("x_row_stride", "a row stride whose bytes are a multiple of 16 (" +
                                                 std::to_string(16 / input_bytes(variant.input)) + " elements)",
                             std::to_string(args.x_row_stride));
  }
  check_batch(variant, args);
  if (args.m == 0 || args.k == 0) return;
  // Why 2^31-1 and not the kernel's u32 group count: the tiled kernels round the count up to whole
  // tiles in 32 bits, which would wrap past 2^32 - 128 (a row of 137 G elements: never in memory).
  if (args.k / variant.group > MAX_GROUPS_PER_ROW)
    throw_invalid_argument("k", "at most 2^31-1 groups (k / group) per row", std::to_string(args.k));
  // Why the one-group grid: it is the larger, and a launch may run either kernel.
  if (grid(variant, args.m, args.k, 1)[0] > MAX_GRID_X)
    throw_invalid_argument("m", "m * k / group within the flat grid (2^31-1 CTAs)", std::to_string(args.m));
  require_pointer("x", args.x, 16);
  // Why: each thread of the family kernel stores its 16 (fp32 input: 8) codes at once.
  require_pointer("q", args.q, variant.input == QuantInput::fp32 ? 8 : 16);
  require_pointer("scales", args.scales, 4);
}

std::array<std::uint32_t, 3> GroupQuant::batched_grid(const QuantVariant& variant, std::uint64_t experts,
                                                      std::uint64_t m, std::uint64_t k, bool masked,
                                                      std::uint32_t sm_count) {
  std::uint64_t per_expert = grid(variant, m, k)[0];
  if (masked && sm_count != 0 && experts != 0) {
    const std::uint64_t cap = (std::uint64_t{QUANT_MASKED_CTAS_PER_SM} * sm_count + experts - 1) / experts;
    per_expert = std::min(per_expert, cap);
  }
  return {static_cast<std::uint32_t>(per_expert), static_cast<std::uint32_t>(std::min<std::uint64_t>(experts, 0xFFFFFFFFu)),
          1};
}

std::string GroupQuant::batched_module_name(const QuantVariant& variant) {
  // The batched family's names are the family's with its own stem (src/jit/families.cpp).
  return std::string(QUANT_BATCHED_ENTRY) + variant.module_name().substr(QUANT_ENTRY.size());
}

bool GroupQuant::prepare_batched(GpuBackend& gpu) const {
  return gpu.try_kernel(batched_module_name(variant_), QUANT_BATCHED_ENTRY).loaded();
}

bool GroupQuant::seed_call(const QuantArgs& args) {
  return args.eps == 1e-10f && (args.x_row_stride == 0 || args.x_row_stride == args.k) &&
         args.k / FP8_QUANT_GROUP <= FP8_QUANT_MAX_GRID_Y;
}

GroupQuant GroupQuant::resolve(GpuBackend& gpu, const QuantVariant& variant) {
  GroupQuant resolved;
  resolved.variant_ = variant;
  const std::string module = variant.module_name();  // throws for an impossible variant
  resolved.prefers_shared_ = quant_prefers_shared(figures_of(gpu.device()));
  const auto kernels = quant_kernels_of(variant);
  if (kernels[static_cast<std::size_t>(QuantKernel::twin)])
    resolved.twin_ = try_target_kernel(gpu, FP8_QUANT_HOPPER_MODULE, FP8_QUANT_HOPPER_ENTRY);
  if (kernels[static_cast<std::size_t>(QuantKernel::shared)]) {
    // The shared kernel takes the small grids on every device. Why the family module only without
    // the twin and where the rule does not prefer the shared kernel: elsewhere no call the seed
    // kernels take runs it, and the others (another eps, strided rows) load it when they come.
    resolved.shared_ = try_kernel(gpu, FP8_QUANT_MODULE, FP8_QUANT_ENTRY);
    if (resolved.shared_.loaded()) resolved.shared_pdl_ = try_kernel(gpu, FP8_QUANT_MODULE, FP8_QUANT_PDL_ENTRY);
    if (resolved.twin_.loaded() || resolved.prefers_shared_) return resolved;
  }
  resolved.kernel_ = gpu.try_kernel(module, QUANT_ENTRY);
  // Why only after the shipped entry loaded: both come from one module, and asking again after a
  // failed load would retry it.
  if (resolved.kernel_.loaded() && items_per_slot(variant) == 2)
    resolved.one_group_kernel_ = gpu.try_kernel(module, QUANT_ONE_GROUP_ENTRY);
  return resolved;
}

KernelHandle GroupQuant::handle_of(const QuantPick& chosen) const noexcept {
  // Why 0 for a batch: resolve never loads the batched module; the call (or prepare_batched) does.
  if (chosen.noop || chosen.entry == QUANT_BATCHED_ENTRY) return {};
  switch (chosen.kernel) {
    case QuantKernel::twin: return twin_;
    case QuantKernel::shared: return shared_;
    case QuantKernel::family_two_groups:
    case QuantKernel::family_one_group: return chosen.entry == QUANT_ONE_GROUP_ENTRY ? one_group_kernel_ : kernel_;
  }
  return {};
}

bool GroupQuant::available() const noexcept { return kernel_.loaded() || twin_.loaded() || shared_.loaded(); }

bool GroupQuant::prepare(GpuBackend& gpu) const {
  if (!available()) return false;
  const bool family = kernel_.loaded() || gpu.try_kernel(variant_.module_name(), QUANT_ENTRY).loaded();
  const bool shared = !quant_kernels_of(variant_)[static_cast<std::size_t>(QuantKernel::shared)] || shared_.loaded();
  return family && shared;
}

QuantPickInputs GroupQuant::inputs_of(const GpuBackend& gpu, const QuantArgs& args) const {
  QuantPickInputs in;
  in.m = args.m;
  in.k = args.k;
  in.sm_count = gpu.device().sm_count;
  in.seed_call = seed_call(args);
  in.twin_aligned = aligned(args.x, 16) && aligned(args.q, 16);
  in.twin_present = twin_.loaded();
  // Why: where the shared kernel did not load, the family kernel runs instead.
  in.shared_present = shared_.loaded();
  in.prefers_shared = prefers_shared_;
  in.twin_lever = fp8_act_quant_hopper_enabled();
  in.one_group_lever = quant_one_group_lever();
  in.experts = args.experts;
  in.masked = args.masked_m != nullptr;
  return in;
}

QuantPick GroupQuant::pick(const GpuBackend& gpu, const QuantArgs& args) const {
  check(variant_, args);
  return pick_with(variant_, inputs_of(gpu, args));
}

QuantLaunch GroupQuant::launch(GpuBackend& gpu, const QuantArgs& args) const {
  const QuantPick chosen = pick(gpu, args);
  if (chosen.noop) return QuantLaunch{chosen, {}};
  // The seed's once-per-slot log of the twin's verdict, wherever the call then runs.
  if (chosen.twin_asked)
    fp8_act_quant_note_verdict(chosen.twin_requested, chosen.twin_reject, static_cast<std::uint32_t>(args.m),
                               static_cast<std::uint32_t>(args.k), gpu.device().sm_count);
  return run(gpu, args, chosen);
}

QuantLaunch GroupQuant::launch_as(GpuBackend& gpu, const QuantArgs& args, QuantKernel kernel) const {
  check(variant_, args);
  const auto refuse_unless = [&](bool can, QuantPickReason why) {
    if (!can)
      throw_invalid_argument("kernel", "a kernel that can take this call, not one where " + std::string(to_string(why)),
                             std::string(to_string(kernel)));
  };
  const bool seed_kernel = kernel == QuantKernel::twin || kernel == QuantKernel::shared;
  refuse_unless(quant_kernels_of(variant_)[static_cast<std::size_t>(kernel)],
                seed_kernel ? QuantPickReason::seed_variant_only : QuantPickReason::not_shipped);
  refuse_unless(!seed_kernel || seed_call(args), QuantPickReason::outside_seed_kernels);
  refuse_unless(kernel != QuantKernel::twin || twin_.loaded(), QuantPickReason::absent);
  refuse_unless(kernel != QuantKernel::twin || (aligned(args.x, 16) && aligned(args.q, 16)),
                QuantPickReason::twin_misaligned);
  QuantPick chosen;
  if (args.m == 0 || args.k == 0) {
    chosen.noop = true;
    return QuantLaunch{chosen, {}};
  }
  if (args.experts != 0) {
    chosen = pick_with(variant_, inputs_of(gpu, args));
    refuse_unless(kernel == chosen.kernel, QuantPickReason::batched_input);
    return run(gpu, args, chosen);
  }
  chosen.kernel = kernel;
  chosen.why.fill(QuantPickReason::chosen_by_caller);
  const auto m = static_cast<std::uint32_t>(args.m);
  const auto k = static_cast<std::uint32_t>(args.k);
  switch (kernel) {
    case QuantKernel::twin:
    case QuantKernel::shared:
      chosen.grid = fp8_quant_grid(kernel == QuantKernel::twin, m, k);
      chosen.block = 128;
      chosen.entry = kernel == QuantKernel::twin ? FP8_QUANT_HOPPER_ENTRY : FP8_QUANT_ENTRY;
      break;
    case QuantKernel::family_two_groups:
    case QuantKernel::family_one_group: {
      const bool one_group = kernel == QuantKernel::family_one_group;
      chosen.grid = grid(variant_, args.m, args.k, one_group ? 1 : 2);
      chosen.block = 256;
      chosen.entry = one_group && items_per_slot(variant_) == 2 ? QUANT_ONE_GROUP_ENTRY : QUANT_ENTRY;
      break;
    }
  }
  return run(gpu, args, chosen);
}

QuantLaunch GroupQuant::run(GpuBackend& gpu, const QuantArgs& args, const QuantPick& chosen) const {
  if (chosen.entry == QUANT_BATCHED_ENTRY) return run_batched(gpu, args, chosen);
  if (chosen.family()) return run_family(gpu, args, chosen);
  const bool twin = chosen.kernel == QuantKernel::twin;
  KernelHandle shared = shared_;
  KernelHandle shared_pdl = shared_pdl_;
  if (!twin && !shared.loaded()) {
    shared = try_kernel(gpu, FP8_QUANT_MODULE, FP8_QUANT_ENTRY);
    if (shared.loaded()) shared_pdl = try_kernel(gpu, FP8_QUANT_MODULE, FP8_QUANT_PDL_ENTRY);
  }
  const KernelHandle kernel = twin ? twin_ : shared;
  if (!kernel.loaded())
    throw_error(ErrorKind::unavailable, Retry::transient,
                "per_token_group_quant: the seed's " + std::string(to_string(chosen.kernel)) +
                    " kernel is not available on device " + std::to_string(gpu.device().ordinal) +
                    " (it did not compile or load: see the log)");
  const Fp8ActQuant seed(shared, twin_, gpu.device().sm_count, shared_pdl);
  Fp8QuantPick launched;
  launched.kernel = kernel;
  launched.grid = chosen.grid;
  launched.twin = twin;
  seed.launch_picked(gpu, launched, args.x, args.q, static_cast<float*>(args.scales), static_cast<std::uint32_t>(args.m),
                     static_cast<std::uint32_t>(args.k), args.stream, args.options);
  return QuantLaunch{chosen, kernel};
}

namespace {

// The arguments both family entries take first, in the kernel's order.
struct FamilyKernelArgs {
  const void* x;
  void* q;
  void* scales;
  unsigned long long m;
  std::uint32_t groups;
  unsigned long long row_stride;
  std::uint32_t rows;  ///< the scales' M extent
  float eps;
  TileDivisor tiles;

  FamilyKernelArgs(const QuantVariant& variant, const QuantArgs& args)
      : x(args.x),
        q(args.q),
        scales(args.scales),
        m(args.m),
        groups(static_cast<std::uint32_t>(groups_of(variant, args.k))),
        row_stride(row_stride_of(variant, args)),
        rows(static_cast<std::uint32_t>(scale_rows(variant, args.m))),
        eps(args.eps) {
    // check() bounds a row's groups by 2^31-1, so its tiles are a valid divisor.
    const std::uint32_t row_tiles = GroupQuant::tiles_per_row(variant, args.k);
    tiles = row_tiles != 0 ? TileDivisor::of_valid(row_tiles) : TileDivisor{};
  }
};

void require_loaded(const KernelHandle& kernel, const std::string& what, const GpuBackend& gpu) {
  if (!kernel.loaded())
    throw_error(ErrorKind::unavailable, Retry::transient,
                "per_token_group_quant: " + what + " is not available on device " + std::to_string(gpu.device().ordinal) +
                    " (no GPU, or it did not compile or load: see the log)");
}

}  // namespace

QuantLaunch GroupQuant::run_family(GpuBackend& gpu, const QuantArgs& args, const QuantPick& chosen) const {
  // Why asked again when not loaded: the seed variant loads its family module only where the
  // device's rule prefers it, and a load that failed at resolve (out of memory) may work now.
  const KernelHandle resolved = handle_of(chosen);
  const KernelHandle kernel =
      resolved.loaded() ? resolved : gpu.try_kernel(variant_.module_name(), chosen.entry);
  require_loaded(kernel, "variant " + variant_.module_name(), gpu);
  FamilyKernelArgs a(variant_, args);
  void* kernel_args[] = {&a.x, &a.q, &a.scales, &a.m, &a.groups, &a.row_stride, &a.rows, &a.eps, &a.tiles};
  gpu.launch(kernel, Dim3{chosen.grid[0], 1, 1}, Dim3{chosen.block, 1, 1}, 0, args.stream, kernel_args,
             quant_launch_options(args.options));
  return QuantLaunch{chosen, kernel};
}

QuantLaunch GroupQuant::run_batched(GpuBackend& gpu, const QuantArgs& args, const QuantPick& chosen) const {
  const std::string module = batched_module_name(variant_);
  const KernelHandle kernel = gpu.try_kernel(module, QUANT_BATCHED_ENTRY);
  require_loaded(kernel, "the batched form " + module, gpu);
  FamilyKernelArgs a(variant_, args);
  unsigned long long x_expert_stride = args.x_expert_stride != 0 ? args.x_expert_stride : a.m * a.row_stride;
  unsigned long long scale_expert_bytes = quant_scales_bytes(variant_, args.m, args.k);
  const std::int32_t* masked_m = args.masked_m;
  void* kernel_args[] = {&a.x,   &a.q,    &a.scales,        &a.m,               &a.groups, &a.row_stride,
                         &a.rows, &a.eps, &a.tiles, &x_expert_stride, &scale_expert_bytes, &masked_m};
  gpu.launch(kernel, Dim3{chosen.grid[0], chosen.grid[1], 1}, Dim3{chosen.block, 1, 1}, 0, args.stream, kernel_args,
             quant_launch_options(args.options));
  return QuantLaunch{chosen, kernel};
}

}  // namespace kiln::ops

#pragma once
/// @file
/// Variant families: one embedded source (kernels_src/, first line "// kiln: variant family")
/// compiled per variant, a choice of value for each of its named compile-time parameters. A variant
/// is an ordinary module to the rest of kiln: its canonical name (e.g.
/// `per_token_group_quant-fp16-g64-int8-row`) is what find_module() resolves, what the cache key,
/// dump files and counters name, and its source is the family's with the parameters' #defines in
/// front. So a variant is compiled (or read from disk) only when something asks for it by name.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jit/registry.hpp"

namespace kiln {

/// One compile-time parameter of a family.
struct VariantParameter {
  std::string name;                 ///< as written in manifests: "in", "group", ...
  std::string define;               ///< the macro the source reads: "KILN_Q_IN"
  std::vector<std::string> values;  ///< allowed spellings, in order
  std::vector<int> numbers;         ///< the macro's value for each spelling
  std::string default_value;        ///< taken when a manifest line leaves the parameter out
  /// How the value appears in the canonical name: `prefix + value` ("g" + "64"); a switch (values
  /// "0"/"1") appears as "-name" when on and not at all when off.
  std::string prefix;
  std::string description;

  bool is_switch() const noexcept { return values.size() == 2 && values[0] == "0" && values[1] == "1"; }
};

/// One parameter value per parameter, by index into `values`.
using VariantChoice = std::vector<std::size_t>;

struct VariantFamily {
  std::string module;  ///< the embedded family source's stem
  std::string description;
  std::vector<VariantParameter> parameters;
  /// Why a combination is impossible ("" when it is fine); names the parameters and what is allowed.
  std::string (*refusal)(const VariantFamily& family, const VariantChoice& choice) = nullptr;
  /// The entry points a valid variant's module exports, a subset of the family source's in its
  /// order (a source may define an entry only for some variants); nullptr: every one of them.
  std::vector<std::string> (*entries)(const VariantFamily& family, const VariantChoice& choice) = nullptr;

  /// Index of parameter `name`, or parameters.size().
  std::size_t parameter_index(std::string_view name) const;
  /// The spelling chosen for parameter `name` in `choice`.
  const std::string& value(const VariantChoice& choice, std::string_view name) const;
};

/// A valid variant of a family.
struct Variant {
  const VariantFamily* family = nullptr;
  VariantChoice choice;

  /// `module-value-value...`: file-name safe ([A-Za-z0-9_-]), the same on every machine.
  std::string name() const;
  /// `name=value` pairs, every parameter, in the family's order.
  std::vector<std::pair<std::string, std::string>> values() const;
};

/// Every family kiln ships (src/jit/families.cpp).
const std::vector<VariantFamily>& variant_families();
/// The family whose module is `module`, or nullptr.
const VariantFamily* find_variant_family(std::string_view module);

/// Every valid variant of `family`, in a fixed order.
std::vector<Variant> all_variants(const VariantFamily& family);

/// A variant from `module name=value ...` (parameters left out take their defaults) or from a
/// canonical name. Throws kiln::Error naming the unknown family, parameter or value with the
/// allowed ones, or why the combination is impossible; nothing is compiled.
Variant parse_variant(std::string_view text);
/// `values` (name=value each) applied to the family's defaults; throws as parse_variant.
Variant make_variant(const VariantFamily& family, const std::vector<std::pair<std::string, std::string>>& values);

/// The variant's module: the family source with `#define`s of its parameters in front (and a
/// `#line 1` so NVRTC's messages keep the file's own line numbers). Made once per process per
/// variant and kept for the process's life, as the embedded modules are.
const KernelSource& variant_source(const Variant& variant);
/// variant_source of the variant called `name` (canonical); nullptr when no family has it.
const KernelSource* find_variant_source(std::string_view name);

/// A manifest file: one variant per line (either form of parse_variant), `#` starts a comment,
/// blank lines are skipped. Throws kiln::Error naming the file and line of the first bad one.
std::vector<Variant> read_variant_manifest(const std::string& path);

}  // namespace kiln

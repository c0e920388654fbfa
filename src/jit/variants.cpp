#include "jit/variants.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "kiln/error.hpp"

namespace kiln {

namespace detail {
const std::vector<KernelSource>& embedded_families();
}

namespace {

std::string joined(const std::vector<std::string>& values) {
  std::string text;
  for (const auto& value : values) text += (text.empty() ? "" : ", ") + value;
  return text;
}

std::string family_names() {
  std::vector<std::string> names;
  for (const auto& family : variant_families()) names.push_back(family.module);
  return joined(names);
}

const VariantFamily& family_named(std::string_view module) {
  if (const VariantFamily* family = find_variant_family(module)) return *family;
  throw_invalid_argument("variant", "a variant family (" + family_names() + ")", "'" + std::string(module) + "'");
}

const KernelSource& family_source(const VariantFamily& family) {
  for (const auto& source : detail::embedded_families())
    if (source.module == family.module) return source;
  throw_error("variant family " + family.module + " has no embedded source (kernels_src/ and src/jit/families.cpp disagree)");
}

VariantChoice default_choice(const VariantFamily& family) {
  VariantChoice choice;
  for (const auto& parameter : family.parameters) {
    std::size_t index = 0;
    while (parameter.values[index] != parameter.default_value) ++index;
    choice.push_back(index);
  }
  return choice;
}

std::string refusal_of(const VariantFamily& family, const VariantChoice& choice) {
  return family.refusal ? family.refusal(family, choice) : std::string();
}

// Why a map of every valid name: families are small (the quantizer has 180 variants), and looking a
// name up in the set of names kiln itself spells is the one parse that cannot accept a near miss.
const std::map<std::string, Variant, std::less<>>& canonical_names() {
  static const std::map<std::string, Variant, std::less<>> names = [] {
    std::map<std::string, Variant, std::less<>> all;
    for (const auto& family : variant_families())
      for (auto& variant : all_variants(family)) all.emplace(variant.name(), variant);
    return all;
  }();
  return names;
}

struct InternedVariant {
  std::string text;
  KernelSource source;
};

std::string prelude(const Variant& variant) {
  std::string text = "// variant " + variant.name() + "\n";
  const auto& parameters = variant.family->parameters;
  for (std::size_t i = 0; i < parameters.size(); ++i)
    text += "#define " + parameters[i].define + " " + std::to_string(parameters[i].numbers[variant.choice[i]]) + "\n";
  return text + "#line 1\n";
}

std::vector<std::string> variant_entries(const Variant& variant, const KernelSource& family) {
  if (!variant.family->entries) return family.entries;
  std::vector<std::string> entries = variant.family->entries(*variant.family, variant.choice);
  for (const auto& entry : entries)
    if (std::find(family.entries.begin(), family.entries.end(), entry) == family.entries.end())
      throw_error("variant " + variant.name() + " lists entry '" + entry + "', which " + family.module +
                  " does not define (kernels_src/ and src/jit/families.cpp disagree)");
  return entries;
}

}  // namespace

std::size_t VariantFamily::parameter_index(std::string_view name) const {
  std::size_t index = 0;
  while (index < parameters.size() && parameters[index].name != name) ++index;
  return index;
}

const std::string& VariantFamily::value(const VariantChoice& choice, std::string_view name) const {
  const std::size_t index = parameter_index(name);
  if (index >= parameters.size()) throw_error("variant family " + module + " has no parameter '" + std::string(name) + "'");
  return parameters[index].values[choice[index]];
}

std::string Variant::name() const {
  std::string text = family->module;
  for (std::size_t i = 0; i < family->parameters.size(); ++i) {
    const VariantParameter& parameter = family->parameters[i];
    const std::string& value = parameter.values[choice[i]];
    if (!parameter.is_switch())
      text += "-" + parameter.prefix + value;
    else if (value == "1")
      text += "-" + parameter.name;
  }
  return text;
}

std::vector<std::pair<std::string, std::string>> Variant::values() const {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (std::size_t i = 0; i < family->parameters.size(); ++i)
    pairs.emplace_back(family->parameters[i].name, family->parameters[i].values[choice[i]]);
  return pairs;
}

const VariantFamily* find_variant_family(std::string_view module) {
  for (const auto& family : variant_families())
    if (family.module == module) return &family;
  return nullptr;
}

std::vector<Variant> all_variants(const VariantFamily& family) {
  std::vector<Variant> variants;
  VariantChoice choice(family.parameters.size(), 0);
  for (;;) {
    if (refusal_of(family, choice).empty()) variants.push_back(Variant{&family, choice});
    std::size_t i = family.parameters.size();
    while (i > 0 && ++choice[i - 1] == family.parameters[i - 1].values.size()) choice[--i] = 0;
    if (i == 0) return variants;
  }
}

Variant make_variant(const VariantFamily& family, const std::vector<std::pair<std::string, std::string>>& values) {
  VariantChoice choice = default_choice(family);
  for (const auto& [name, value] : values) {
    const std::size_t index = family.parameter_index(name);
    if (index == family.parameters.size()) {
      std::vector<std::string> names;
      for (const auto& parameter : family.parameters) names.push_back(parameter.name);
      throw_invalid_argument("parameter", "one of " + family.module + "'s parameters (" + joined(names) + ")",
                             "'" + name + "'");
    }
    const auto& allowed = family.parameters[index].values;
    std::size_t at = 0;
    while (at < allowed.size() && allowed[at] != value) ++at;
    if (at == allowed.size()) throw_invalid_argument(name, "one of " + joined(allowed), "'" + value + "'");
    choice[index] = at;
  }
  const std::string refusal = refusal_of(family, choice);
  if (!refusal.empty())
    throw_error(ErrorKind::invalid_argument, Retry::permanent,
                "impossible variant of " + family.module + ": " + refusal);
  return Variant{&family, choice};
}

Variant parse_variant(std::string_view text) {
  std::istringstream words{std::string(text)};
  std::string first;
  if (!(words >> first)) throw_invalid_argument("variant", "a variant name or 'family name=value ...'", "an empty line");
  std::vector<std::pair<std::string, std::string>> values;
  for (std::string word; words >> word;) {
    const auto equals = word.find('=');
    if (equals == std::string::npos || equals == 0)
      throw_invalid_argument("variant", "name=value after the family name", "'" + word + "'");
    values.emplace_back(word.substr(0, equals), word.substr(equals + 1));
  }
  if (values.empty()) {
    const auto& names = canonical_names();
    if (const auto found = names.find(first); found != names.end()) return found->second;
    if (const VariantFamily* family = find_variant_family(first)) return make_variant(*family, {});
    const auto dash = first.find('-');
    const std::string module = first.substr(0, dash);
    if (find_variant_family(module))
      throw_invalid_argument("variant", "a canonical name of " + module + " (`kiln list --variants`) or '" + module +
                                            " name=value ...'",
                             "'" + first + "'");
  }
  return make_variant(family_named(first), values);
}

const KernelSource& variant_source(const Variant& variant) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<InternedVariant>, std::less<>> interned;
  const std::string name = variant.name();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = interned[name];
  if (!slot) {
    const KernelSource& family = family_source(*variant.family);
    auto made = std::make_unique<InternedVariant>();
    const std::string defines = prelude(variant);
    made->text = defines + std::string(family.text);
    // Why the family's digest: the parameters are in the module name, so name + digest identify the
    // text (and the cache key hashes the full text anyway).
    made->source = KernelSource{name, family.family, variant_entries(variant, family), made->text, family.sha256,
                                defines.size()};
    slot = std::move(made);
  }
  return slot->source;
}

const KernelSource* find_variant_source(std::string_view name) {
  const auto& names = canonical_names();
  const auto found = names.find(name);
  return found == names.end() ? nullptr : &variant_source(found->second);
}

std::vector<Variant> read_variant_manifest(const std::string& path) {
  std::ifstream file(path);
  if (!file)
    throw_error(ErrorKind::io, Retry::transient, "cannot read variant manifest " + path + ": " + std::strerror(errno));
  std::vector<Variant> variants;
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    const auto comment = line.find('#');
    if (comment != std::string::npos) line.resize(comment);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      variants.push_back(parse_variant(line));
    } catch (const Error& error) {
      throw_error(error.kind(), error.retry(), path + ":" + std::to_string(number) + ": " + error.what());
    }
  }
  if (file.bad()) throw_error(ErrorKind::io, Retry::transient, "cannot read variant manifest " + path + ": read error");
  return variants;
}

}  // namespace kiln

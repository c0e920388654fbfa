#include "jit/registry.hpp"

#include "jit/variants.hpp"

namespace kiln {
namespace detail {
const std::vector<KernelSource>& embedded_modules();
const std::vector<KernelHeader>& embedded_headers();
}  // namespace detail

const std::vector<KernelSource>& embedded_modules() { return detail::embedded_modules(); }
const std::vector<KernelHeader>& embedded_headers() { return detail::embedded_headers(); }

const KernelSource* find_module(std::string_view module) {
  for (const auto& source : embedded_modules())
    if (source.module == module) return &source;
  return find_variant_source(module);
}

}  // namespace kiln

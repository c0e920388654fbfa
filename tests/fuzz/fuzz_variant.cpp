// Fuzz target: the variant parser, the reader of what a user or a deployment's manifest names
// (`kiln warm --variants`, `kiln pack --variants`, `kiln dump`, find_module). The input is one
// manifest line, either spelling: `family name=value ...` or a canonical name.
// Invariants: a refusal is a kiln::Error that names what it refuses, never another exception; an
// accepted variant's canonical name is file-name safe and parses back to the same choice, and its
// name=value pairs applied to the family's defaults give it again.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "jit/variants.hpp"
#include "kiln/error.hpp"

namespace {

using namespace kiln;

void require(bool condition) {
  if (!condition) std::abort();
}

bool file_name_safe(const std::string& name) {
  if (name.empty()) return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  Variant variant;
  try {
    variant = parse_variant(line);
  } catch (const Error& e) {
    require(std::string_view(e.what()).size() > 0);
    return 0;
  }
  require(variant.family != nullptr && variant.choice.size() == variant.family->parameters.size());
  for (std::size_t i = 0; i < variant.choice.size(); ++i)
    require(variant.choice[i] < variant.family->parameters[i].values.size());
  const std::string name = variant.name();
  require(file_name_safe(name));
  require(parse_variant(name).choice == variant.choice);
  require(make_variant(*variant.family, variant.values()).choice == variant.choice);
  return 0;
}

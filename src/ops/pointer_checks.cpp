#include "ops/pointer_checks.hpp"

#include "kiln/error.hpp"

namespace kiln::ops {

bool aligned(const void* pointer, std::uintptr_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
}

std::string pointer_text(const void* pointer) { return std::to_string(reinterpret_cast<std::uintptr_t>(pointer)); }

void require_pointer(const char* name, const void* pointer, std::uintptr_t alignment) {
  if (pointer == nullptr) throw_invalid_argument(name, "a device pointer", "null");
  if (!aligned(pointer, alignment))
    throw_invalid_argument(name, std::to_string(alignment) + "-byte alignment", "address " + pointer_text(pointer));
}

}  // namespace kiln::ops

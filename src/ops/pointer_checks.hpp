#pragma once
// Pointer checks every op's launch makes, with the project's error wording. Internal.

#include <cstdint>
#include <string>

namespace kiln::ops {

bool aligned(const void* pointer, std::uintptr_t alignment);
/// The address in decimal, for messages.
std::string pointer_text(const void* pointer);
/// Throws kiln::Error naming `name` for a null or misaligned pointer.
void require_pointer(const char* name, const void* pointer, std::uintptr_t alignment);

}  // namespace kiln::ops

#pragma once
/// @file
/// The GNU build ID of an ELF shared library, from its mapped notes or from its file without
/// loading it: how kiln names the exact NVRTC build in cache keys whether or not NVRTC is loaded.

#include <cstddef>
#include <optional>
#include <string>

namespace kiln {

/// The NT_GNU_BUILD_ID note (lowercase hex) in one note segment or section of `size` bytes whose
/// notes are `align`-byte aligned (4, or 8); nothing if there is none or the notes are malformed.
std::optional<std::string> build_id_in_notes(const unsigned char* notes, std::size_t size, std::size_t align);

/// The build ID of the 64-bit little-endian ELF file at `path`, read through its program headers
/// (PT_NOTE) with bounded reads; the file is never mapped executable or loaded. Nothing when the
/// file has none; `error` (when given) then says why (unreadable, not ELF64, no note).
std::optional<std::string> elf_file_build_id(const std::string& path, std::string* error = nullptr);

}  // namespace kiln

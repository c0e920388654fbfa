#include "jit/elf_build_id.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace kiln {

namespace {

std::string hex_of(const unsigned char* bytes, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 0xf];
  }
  return out;
}

bool read_at(int fd, void* out, std::size_t size, std::uint64_t offset) {
  auto* bytes = static_cast<unsigned char*>(out);
  while (size > 0) {
    const ssize_t got = ::pread(fd, bytes, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    bytes += got;
    size -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
  return true;
}

std::optional<std::string> fail(std::string* error, std::string why) {
  if (error != nullptr) *error = std::move(why);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> build_id_in_notes(const unsigned char* notes, std::size_t size, std::size_t align) {
  const auto padded = [align](std::size_t n) { return (n + align - 1) / align * align; };
  std::size_t at = 0;
  while (size - at >= sizeof(Elf64_Nhdr)) {
    Elf64_Nhdr header;
    std::memcpy(&header, notes + at, sizeof header);
    at += sizeof header;
    const std::size_t name_at = at;
    if (header.n_namesz > size - at || padded(header.n_namesz) > size - at) return std::nullopt;
    at += padded(header.n_namesz);
    if (header.n_descsz > size - at) return std::nullopt;
    const std::size_t desc_at = at;
    at += std::min(padded(header.n_descsz), size - at);
    if (header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 && std::memcmp(notes + name_at, "GNU", 4) == 0 &&
        header.n_descsz > 0)
      return hex_of(notes + desc_at, header.n_descsz);
  }
  return std::nullopt;
}

std::optional<std::string> elf_file_build_id(const std::string& path, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(error, "cannot open " + path + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) return fail(error, path + " is not a regular file");
  const auto file_size = static_cast<std::uint64_t>(info.st_size);
  Elf64_Ehdr header{};
  if (!read_at(fd, &header, sizeof header, 0) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_phentsize != sizeof(Elf64_Phdr))
    return fail(error, path + " is not a 64-bit little-endian ELF file");
  // Why bounds everywhere: the file is input; a corrupt one must give "no build ID", not a crash.
  constexpr std::uint64_t max_notes = 1 << 20;
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    if (!read_at(fd, &segment, sizeof segment, header.e_phoff + std::uint64_t{i} * sizeof segment))
      return fail(error, path + ": program header " + std::to_string(i) + " is outside the file");
    if (segment.p_type != PT_NOTE || segment.p_filesz == 0 || segment.p_filesz > max_notes ||
        segment.p_offset > file_size || segment.p_filesz > file_size - segment.p_offset)
      continue;
    std::vector<unsigned char> notes(segment.p_filesz);
    if (!read_at(fd, notes.data(), notes.size(), segment.p_offset)) continue;
    // Why 4 unless 8: ELF notes are 4-byte aligned except in segments that say 8 (gnu.property).
    if (auto id = build_id_in_notes(notes.data(), notes.size(), segment.p_align == 8 ? 8 : 4)) return id;
  }
  return fail(error, path + " has no GNU build ID note");
}

}  // namespace kiln

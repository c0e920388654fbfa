// Fuzz target: the ELF build-ID reader, which every process runs on the NVRTC library file
// (KILN_NVRTC_LIBRARY may name any file) to key its cache without loading NVRTC. The first input
// byte picks what the rest is:
//   0, 1: a note segment, 4- or 8-byte aligned (build_id_in_notes);
//   2: a whole file (elf_file_build_id on a temporary file holding it);
//   3: a build ID: put in a well-formed ELF64 file as its one GNU note, which must read back.
// Invariants: no read outside the input (ASan); an ID is non-empty lowercase hex of even length;
// a file without one says why, naming the file.
#include <elf.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "jit/elf_build_id.hpp"

namespace {

using namespace kiln;

void require(bool condition) {
  if (!condition) std::abort();
}

void check_id(const std::optional<std::string>& id) {
  if (!id) return;
  require(!id->empty() && id->size() % 2 == 0);
  for (const char c : *id) require((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
}

// The file mode 2 and 3 write, made once and removed at exit.
struct ScratchFile {
  std::string path;
  ScratchFile() {
    char name[] = "/tmp/kiln-fuzz-elf-XXXXXX";
    const int fd = ::mkstemp(name);
    require(fd >= 0);
    ::close(fd);
    path = name;
  }
  ~ScratchFile() { ::unlink(path.c_str()); }
};

const std::string& file_path() {
  static const ScratchFile file;
  return file.path;
}

std::optional<std::string> build_id_of_file(const std::vector<unsigned char>& bytes, std::string& error) {
  {
    std::ofstream out(file_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    require(static_cast<bool>(out));
  }
  return elf_file_build_id(file_path(), &error);
}

template <class T>
void append(std::vector<unsigned char>& bytes, const T& value) {
  const auto* raw = reinterpret_cast<const unsigned char*>(&value);
  bytes.insert(bytes.end(), raw, raw + sizeof value);
}

// A 64-bit little-endian ELF file whose one program header is a PT_NOTE with the GNU build ID `id`.
std::vector<unsigned char> elf_with_build_id(const unsigned char* id, std::size_t size) {
  Elf64_Ehdr header{};
  std::memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = ELFCLASS64;
  header.e_ident[EI_DATA] = ELFDATA2LSB;
  header.e_ident[EI_VERSION] = EV_CURRENT;
  header.e_type = ET_DYN;
  header.e_version = EV_CURRENT;
  header.e_phoff = sizeof header;
  header.e_ehsize = sizeof header;
  header.e_phentsize = sizeof(Elf64_Phdr);
  header.e_phnum = 1;
  Elf64_Nhdr note{};
  note.n_namesz = 4;
  note.n_descsz = static_cast<Elf64_Word>(size);
  note.n_type = NT_GNU_BUILD_ID;
  Elf64_Phdr segment{};
  segment.p_type = PT_NOTE;
  segment.p_offset = sizeof header + sizeof segment;
  segment.p_filesz = sizeof note + 4 + (size + 3) / 4 * 4;
  segment.p_align = 4;
  std::vector<unsigned char> bytes;
  append(bytes, header);
  append(bytes, segment);
  append(bytes, note);
  bytes.insert(bytes.end(), {'G', 'N', 'U', '\0'});
  bytes.insert(bytes.end(), id, id + size);
  bytes.resize(bytes.size() + (4 - size % 4) % 4, 0);
  return bytes;
}

std::string hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < size; ++i) out += {digits[bytes[i] >> 4], digits[bytes[i] & 0xf]};
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned char* rest = data + 1;
  const std::size_t rest_size = size - 1;
  std::string error;
  switch (data[0] % 4) {
    case 0:
    case 1: {
      // Why a copy: the exact size, so ASan sees a read one byte past the notes.
      const std::vector<unsigned char> notes(rest, rest + rest_size);
      check_id(build_id_in_notes(notes.data(), notes.size(), data[0] % 4 == 0 ? 4 : 8));
      break;
    }
    case 2: {
      const auto id = build_id_of_file(std::vector<unsigned char>(rest, rest + rest_size), error);
      check_id(id);
      require(id.has_value() || error.find(file_path()) != std::string::npos);
      break;
    }
    default: {
      if (rest_size == 0) break;
      const auto id = build_id_of_file(elf_with_build_id(rest, rest_size), error);
      require(id.has_value() && *id == hex(rest, rest_size));
    }
  }
  return 0;
}

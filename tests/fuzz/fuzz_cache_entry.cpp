// Fuzz target: the disk cache entry decoder and the cache file name parser, the two readers of
// what another process (or an attacker with write access) left in the cache folder.
//
// The first input byte picks how far the bytes may get:
//   0: decoded against a fixed key, as a stray file would be;
//   1: against the key the bytes themselves hold, to get past the key check;
//   2: as 1, with the checksum recomputed, to reach the section and meta parsers.
// The rest of the input is the entry; it is also parsed as a file name.
// Invariants: the decoder never reads outside the buffer (ASan), an accepted entry's views lie
// inside it, and an accepted entry re-encodes to an entry that decodes to the same fields.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cache/disk/cache_entry.hpp"
#include "cache/disk/cache_names.hpp"
#include "kiln/error.hpp"

namespace {

using namespace kiln;

void require(bool condition) {
  if (!condition) std::abort();
}

bool inside(const std::uint8_t* data, std::size_t size, const void* pointer, std::size_t length) {
  const auto* p = static_cast<const std::uint8_t*>(pointer);
  return length == 0 || (p >= data && length <= size && p <= data + size - length);
}

void reseal(std::vector<std::uint8_t>& bytes) {
  if (bytes.size() < 48) return;
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(bytes.data() + 48, bytes.size() - 48));
  std::memcpy(bytes.data() + 32, canonical.digest, 16);
}

bool same_number(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void check_round_trip(const EntryView& view) {
  CompiledModule module;
  module.module = std::string(view.module);
  module.target = Target{};  // the meta text is what must survive; name() is not a parser of it
  module.options = view.options;
  module.log = std::string(view.log);
  module.ptx = std::string(view.ptx);
  module.cubin.assign(view.cubin, view.cubin + view.cubin_size);
  module.compile_ms = view.compile_ms;
  std::vector<std::uint8_t> again;
  try {
    again = encode_entry(view.key, module, view.nvrtc, 0);
  } catch (const Error&) {
    // Why allowed: the decoder accepts any byte in a meta value, the encoder refuses newline and NUL
    // in names; such an entry can only be found under a name that holds them, which kiln never asks for.
    return;
  }
  const EntryDecode decoded = decode_entry(again.data(), again.size(), view.key);
  require(decoded.ok());
  const EntryView& back = decoded.entry;
  require(back.key == view.key && back.module == view.module && back.nvrtc == view.nvrtc);
  require(back.options == view.options && back.log == view.log && back.ptx == view.ptx);
  require(back.cubin_size == view.cubin_size && std::memcmp(back.cubin, view.cubin, view.cubin_size) == 0);
  require(same_number(back.compile_ms, view.compile_ms));
}

void check_file_name(const std::uint8_t* data, std::size_t size) {
  const std::string_view name(reinterpret_cast<const char*>(data), size);
  const auto parsed = detail::parse_cache_file_name(name);
  if (!parsed) return;
  // A name kiln accepts is exactly the name kiln would give that module, target and key.
  const std::string entry = detail::entry_file_name(parsed->key, parsed->module, parsed->target);
  switch (parsed->kind) {
    case detail::CacheFileKind::entry: require(name == entry); break;
    case detail::CacheFileKind::lock:
      require(name == detail::lock_file_name(parsed->key, parsed->module, parsed->target));
      break;
    case detail::CacheFileKind::temp: require(name.substr(0, entry.size() + 1) == entry + "."); break;
  }
  require(name.find('/') == std::string_view::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 3;
  std::vector<std::uint8_t> bytes(data + 1, data + size);
  check_file_name(bytes.data(), bytes.size());

  CacheKey key;
  for (std::size_t i = 0; i < key.bytes.size(); ++i) key.bytes[i] = static_cast<std::uint8_t>(0xA5 ^ i);
  if (mode >= 1 && bytes.size() >= 32) std::memcpy(key.bytes.data(), bytes.data() + 16, 16);
  if (mode == 2) reseal(bytes);

  // Why a copy of exactly the entry's size: ASan then flags any read past the end.
  std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[bytes.size() ? bytes.size() : 1]);
  if (!bytes.empty()) std::memcpy(exact.get(), bytes.data(), bytes.size());
  const std::uint8_t* entry = exact.get();
  const EntryDecode decoded = decode_entry(bytes.empty() ? nullptr : entry, bytes.size(), key);
  if (!decoded.ok()) {
    require(!decoded.detail.empty());
    return 0;
  }
  const EntryView& view = decoded.entry;
  require(view.key == key);
  for (auto text : {view.module, view.target, view.nvrtc, view.created, view.log, view.ptx})
    require(inside(entry, bytes.size(), text.data(), text.size()));
  require(inside(entry, bytes.size(), view.cubin, view.cubin_size));
  require(!view.module.empty() && !view.target.empty());
  check_round_trip(view);
  return 0;
}

#pragma once
/// @file
/// The disk cache key: an XXH3-128 digest over everything that changes a compiled binary and
/// nothing else. Pure; the same inputs give the same key in any process on any machine.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jit/registry.hpp"
#include "kiln/target.hpp"

namespace kiln {

/// Version of the key encoding and of the entry file format. Bump it whenever either changes, so
/// old entries stop matching instead of being misread (the golden-key test notices an encoding
/// change that forgot to).
/// 2: the key names NVRTC's exact build (CacheKeyInputs::nvrtc_build), not only major.minor.
/// 3: NVRTC is named by its build alone ("build-id <hex>", read from the library file without
///    loading it), no longer by nvrtcVersion's major.minor, which needs NVRTC loaded.
inline constexpr std::uint32_t cache_format_version = 3;

/// Everything a compile depends on. Views must stay valid for the duration of make_cache_key.
struct CacheKeyInputs {
  std::uint32_t format_version = cache_format_version;
  /// The exact NVRTC build that compiles (nvrtc_build(), e.g. "build-id 65be0db3..."): two patch
  /// releases of NVRTC 13.0 share nvrtcVersion's answer but may emit different code, so they must
  /// not share entries. No path, user or time: a bundle made on one machine hits on another.
  std::string_view nvrtc_build;
  std::string_view target;                ///< Target::name(), e.g. "sm_90a"
  OutputKind kind = OutputKind::cubin;    ///< CUBIN or PTX
  std::vector<std::string> options;       ///< the exact NVRTC option list; order matters
  std::string_view module;                ///< embedded module name
  std::string_view source;                ///< the module's source bytes
  std::vector<KernelHeader> headers;      ///< headers handed to NVRTC (name + bytes); order does not matter
};

/// A 128-bit digest. Equality is byte equality; `hex()` names the entry's file.
struct CacheKey {
  std::array<std::uint8_t, 16> bytes{};  ///< XXH3-128 in canonical (big-endian) byte order

  /// 32 lowercase hex digits.
  std::string hex() const;

  friend bool operator==(const CacheKey& a, const CacheKey& b) noexcept { return a.bytes == b.bytes; }
  friend bool operator!=(const CacheKey& a, const CacheKey& b) noexcept { return !(a == b); }
};

/// Hashes a prefix-free encoding of `inputs` (every string and list carries its length, so
/// {"-a","b"} and {"-ab"} differ). Headers are hashed sorted by name, then bytes: NVRTC resolves
/// them by name, so the order they are listed in does not change the binary.
CacheKey make_cache_key(const CacheKeyInputs& inputs);

/// The key spelled by `hex()`: exactly 32 lowercase hex digits; nothing otherwise.
std::optional<CacheKey> parse_cache_key(std::string_view hex);

}  // namespace kiln

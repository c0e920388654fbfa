#include "cache/disk/cache_entry.hpp"

#include <charconv>
#include <cstring>
#include <ctime>

#include <xxhash.h>

#include "kiln/error.hpp"

namespace kiln {

namespace {

constexpr char magic[8] = {'K', 'I', 'L', 'N', 'C', 'A', 'C', 'H'};
constexpr std::size_t checksum_offset = 32;
constexpr std::size_t checked_from = 48;  // the checksum covers [checked_from, end)
constexpr std::size_t table_entry_bytes = 16;

enum class Section : std::uint32_t { meta = 1, options = 2, log = 3, ptx = 4, cubin = 5 };
constexpr Section section_order[entry_section_count] = {Section::meta, Section::options, Section::log,
                                                         Section::ptx, Section::cubin};

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}
void put_u64(std::vector<std::uint8_t>& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}
void put_bytes(std::vector<std::uint8_t>& out, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  out.insert(out.end(), bytes, bytes + size);
}

std::uint32_t get_u32(const std::uint8_t* p) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = value << 8 | p[i];
  return value;
}
std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | p[i];
  return value;
}

void checksum(const std::uint8_t* data, std::size_t size, std::uint8_t out[16]) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(data + checked_from, size - checked_from));
  std::memcpy(out, canonical.digest, 16);
}

std::string iso_utc(std::int64_t unix_s) {
  const auto seconds = static_cast<std::time_t>(unix_s);
  std::tm utc{};
  char text[32] = "unknown";
  if (gmtime_r(&seconds, &utc) != nullptr) std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string meta_text(const CompiledModule& module, std::string_view nvrtc, std::int64_t created_unix_s) {
  const std::string target = module.target.name();
  for (std::string_view field : {std::string_view(module.module), std::string_view(target), nvrtc})
    if (field.find_first_of(std::string_view("\n\0", 2)) != std::string_view::npos)
      throw_invalid_argument("module", "a module, target and NVRTC version without newline or NUL",
                             "'" + module.module + "' for '" + target + "'");
  char ms[64];
  const auto printed = std::to_chars(ms, ms + sizeof ms, module.compile_ms);
  std::string text;
  text += "module=" + module.module + "\n";
  text += "target=" + target + "\n";
  text += "nvrtc=" + std::string(nvrtc) + "\n";
  text += "created=" + iso_utc(created_unix_s) + "\n";
  text += "compile_ms=" + std::string(ms, printed.ptr) + "\n";
  return text;
}

EntryDecode fault(EntryFault kind, std::string detail) {
  EntryDecode result;
  result.fault = kind;
  result.detail = std::move(detail);
  return result;
}

/// The meta lines, each field exactly once and nothing else.
bool parse_meta(std::string_view text, EntryView& entry, std::string& problem) {
  struct Field {
    std::string_view name;
    std::string_view* value;
    bool seen;
  };
  std::string_view compile_ms;
  Field fields[] = {{"module", &entry.module, false},   {"target", &entry.target, false},
                    {"nvrtc", &entry.nvrtc, false},     {"created", &entry.created, false},
                    {"compile_ms", &compile_ms, false}};
  while (!text.empty()) {
    const auto end = text.find('\n');
    if (end == std::string_view::npos) {
      problem = "last meta line has no newline";
      return false;
    }
    const auto line = text.substr(0, end);
    text.remove_prefix(end + 1);
    const auto equals = line.find('=');
    if (equals == std::string_view::npos) {
      problem = "meta line without '='";
      return false;
    }
    const auto name = line.substr(0, equals);
    Field* field = nullptr;
    for (auto& candidate : fields)
      if (candidate.name == name) field = &candidate;
    if (field == nullptr || field->seen) {
      problem = "unknown or repeated meta field '" + std::string(name) + "'";
      return false;
    }
    field->seen = true;
    *field->value = line.substr(equals + 1);
  }
  for (const auto& field : fields)
    if (!field.seen) {
      problem = "meta field '" + std::string(field.name) + "' missing";
      return false;
    }
  if (entry.module.empty() || entry.target.empty()) {
    problem = "empty module or target";
    return false;
  }
  const auto parsed = std::from_chars(compile_ms.data(), compile_ms.data() + compile_ms.size(), entry.compile_ms);
  if (parsed.ec != std::errc() || parsed.ptr != compile_ms.data() + compile_ms.size()) {
    problem = "compile_ms is not a number";
    return false;
  }
  return true;
}

bool parse_options(const std::uint8_t* data, std::size_t size, std::vector<std::string>& options) {
  std::size_t at = 0;
  while (at < size) {
    if (size - at < 4) return false;
    const std::uint64_t length = get_u32(data + at);
    at += 4;
    if (length > size - at) return false;
    options.emplace_back(reinterpret_cast<const char*>(data + at), static_cast<std::size_t>(length));
    at += static_cast<std::size_t>(length);
  }
  return true;
}

}  // namespace

std::string_view to_string(EntryFault fault) {
  switch (fault) {
    case EntryFault::none: return "ok";
    case EntryFault::empty: return "empty";
    case EntryFault::truncated: return "truncated";
    case EntryFault::bad_magic: return "bad magic";
    case EntryFault::bad_version: return "other format version";
    case EntryFault::wrong_key: return "wrong key";
    case EntryFault::bad_layout: return "bad layout";
    case EntryFault::bad_checksum: return "bad checksum";
    case EntryFault::bad_meta: return "bad meta";
  }
  return "unknown fault";
}

std::vector<std::uint8_t> encode_entry(const CacheKey& key, const CompiledModule& module,
                                       std::string_view nvrtc, std::int64_t created_unix_s) {
  const std::string meta = meta_text(module, nvrtc, created_unix_s);
  std::vector<std::uint8_t> options;
  for (const auto& option : module.options) {
    if (option.size() > UINT32_MAX) throw_invalid_argument("options", "options under 4 GiB each", "a longer one");
    put_u32(options, static_cast<std::uint32_t>(option.size()));
    put_bytes(options, option.data(), option.size());
  }
  const std::size_t sizes[entry_section_count] = {meta.size(), options.size(), module.log.size(),
                                                  module.ptx.size(), module.cubin.size()};
  std::size_t total = entry_header_bytes + table_entry_bytes * entry_section_count;
  for (auto size : sizes) total += size;

  std::vector<std::uint8_t> out;
  out.reserve(total);
  put_bytes(out, magic, sizeof magic);
  put_u32(out, cache_format_version);
  put_u32(out, entry_section_count);
  put_bytes(out, key.bytes.data(), key.bytes.size());
  out.resize(out.size() + 16);  // checksum, filled in last
  put_u64(out, total);
  for (std::size_t i = 0; i < entry_section_count; ++i) {
    put_u32(out, static_cast<std::uint32_t>(section_order[i]));
    put_u32(out, 0);
    put_u64(out, sizes[i]);
  }
  put_bytes(out, meta.data(), meta.size());
  put_bytes(out, options.data(), options.size());
  put_bytes(out, module.log.data(), module.log.size());
  put_bytes(out, module.ptx.data(), module.ptx.size());
  put_bytes(out, module.cubin.data(), module.cubin.size());
  checksum(out.data(), out.size(), out.data() + checksum_offset);
  return out;
}

EntryDecode decode_entry(const std::uint8_t* data, std::size_t size, const CacheKey& expected) {
  if (size == 0 || data == nullptr) return fault(EntryFault::empty, "zero bytes");
  if (size < entry_header_bytes)
    return fault(EntryFault::truncated, std::to_string(size) + " bytes, shorter than the header");
  if (std::memcmp(data, magic, sizeof magic) != 0) return fault(EntryFault::bad_magic, "not a kiln cache entry");
  const auto version = get_u32(data + 8);
  if (version != cache_format_version)
    return fault(EntryFault::bad_version, "format version " + std::to_string(version) + ", expected " +
                                              std::to_string(cache_format_version));
  if (std::memcmp(data + 16, expected.bytes.data(), expected.bytes.size()) != 0)
    return fault(EntryFault::wrong_key, "entry holds another key");
  const auto recorded = get_u64(data + 48);
  if (recorded > size)
    return fault(EntryFault::truncated, std::to_string(size) + " of " + std::to_string(recorded) + " bytes");
  if (recorded < size)
    return fault(EntryFault::bad_layout, std::to_string(size - recorded) + " bytes after the recorded end");
  const auto count = get_u32(data + 12);
  if (count != entry_section_count)
    return fault(EntryFault::bad_layout, std::to_string(count) + " sections, expected " +
                                             std::to_string(entry_section_count));
  const std::size_t table_end = entry_header_bytes + table_entry_bytes * entry_section_count;
  if (size < table_end) return fault(EntryFault::truncated, "section table cut short");

  std::size_t offsets[entry_section_count];
  std::size_t sizes[entry_section_count];
  std::size_t at = table_end;
  for (std::size_t i = 0; i < entry_section_count; ++i) {
    const std::uint8_t* row = data + entry_header_bytes + table_entry_bytes * i;
    if (get_u32(row) != static_cast<std::uint32_t>(section_order[i]) || get_u32(row + 4) != 0)
      return fault(EntryFault::bad_layout, "section " + std::to_string(i) + " has an unexpected kind");
    const auto section = get_u64(row + 8);
    if (section > size - at) return fault(EntryFault::bad_layout, "section " + std::to_string(i) + " overruns the entry");
    offsets[i] = at;
    sizes[i] = static_cast<std::size_t>(section);
    at += sizes[i];
  }
  if (at != size) return fault(EntryFault::bad_layout, "sections do not fill the entry");

  std::uint8_t sum[16];
  checksum(data, size, sum);
  if (std::memcmp(sum, data + checksum_offset, sizeof sum) != 0)
    return fault(EntryFault::bad_checksum, "payload checksum does not match");

  EntryDecode result;
  EntryView& entry = result.entry;
  std::copy(data + 16, data + 32, entry.key.bytes.begin());
  auto text = [&](std::size_t i) { return std::string_view(reinterpret_cast<const char*>(data + offsets[i]), sizes[i]); };
  std::string problem;
  if (!parse_meta(text(0), entry, problem)) return fault(EntryFault::bad_meta, problem);
  if (!parse_options(data + offsets[1], sizes[1], entry.options))
    return fault(EntryFault::bad_layout, "options section is malformed");
  entry.log = text(2);
  entry.ptx = text(3);
  entry.cubin = data + offsets[4];
  entry.cubin_size = sizes[4];
  return result;
}

CompiledModule compiled_module_of(const EntryView& entry, const Target& target) {
  CompiledModule result;
  result.module = std::string(entry.module);
  result.target = target;
  result.options = entry.options;
  result.ptx = std::string(entry.ptx);
  result.cubin.assign(entry.cubin, entry.cubin + entry.cubin_size);
  result.log = std::string(entry.log);
  result.compile_ms = entry.compile_ms;
  return result;
}

}  // namespace kiln

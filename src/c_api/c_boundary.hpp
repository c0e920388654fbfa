#pragma once
// The C ABI's boundary: every kiln_ function runs its body through `guarded`, which turns any
// exception into a status and this thread's last-error message, so no exception reaches C.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kiln/error.hpp"
#include "kiln/kiln.h"

// Why hidden: these helpers serve the kiln_ functions only; kiln.map exports all of namespace kiln.
namespace kiln {
namespace c_api __attribute__((visibility("hidden"))) {

/// A failure whose status the C layer knows better than the exception's kind would tell.
class StatusError : public std::runtime_error {
 public:
  StatusError(kiln_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  kiln_status status() const noexcept { return status_; }

 private:
  kiln_status status_;
};

/// Whether `error` is of kind invalid_argument (kiln::throw_invalid_argument raises those).
bool is_invalid_argument(const kiln::Error& error) noexcept;

/// Empties this thread's last error; every kiln_ call but the two string queries starts with it.
void clear_last_error() noexcept;
/// This thread's last error, as kiln_last_error returns it.
const char* last_error() noexcept;

/// Status and last error for the exception being handled: call only inside a catch block.
kiln_status status_of_current_exception() noexcept;

/// Runs `body` (which returns nothing) and maps what it throws to a status.
template <class Body>
kiln_status guarded(Body&& body) noexcept {
  clear_last_error();
  try {
    body();
    return KILN_OK;
  } catch (...) {
    return status_of_current_exception();
  }
}

/// Throws kiln::Error "invalid argument 'name': expected ..., got null" when `pointer` is null.
void require_pointer(const void* pointer, const char* name);

/// Checks an output struct before anything runs: not null, `struct_size` at least `v1_size`.
template <class Struct>
void require_struct(const Struct* out, const char* name, std::uint32_t v1_size) {
  require_pointer(out, name);
  if (out->struct_size < v1_size)
    throw_invalid_argument(std::string(name) + "->struct_size", "at least " + std::to_string(v1_size),
                           std::to_string(out->struct_size));
}

/// Copies `value` into `*out` (checked by require_struct): the bytes both sides know, keeping the
/// caller's `struct_size` and whatever lies past kiln's own size.
template <class Struct>
void write_struct(Struct* out, Struct value) noexcept {
  value.struct_size = out->struct_size;
  const std::size_t bytes = out->struct_size < sizeof(Struct) ? out->struct_size : sizeof(Struct);
  std::memcpy(static_cast<void*>(out), &value, bytes);
}

/// An input struct (checked by require_struct) as kiln's version of it: the caller's bytes where
/// both sides know the field, `defaults` for fields the caller's older version lacks.
template <class Struct>
Struct read_struct(const Struct* in, Struct defaults) noexcept {
  const std::size_t bytes = in->struct_size < sizeof(Struct) ? in->struct_size : sizeof(Struct);
  std::memcpy(static_cast<void*>(&defaults), in, bytes);
  return defaults;
}

/// Copies `text` into `out[N]`, cut to fit, always NUL-terminated.
template <std::size_t N>
void copy_text(char (&out)[N], std::string_view text) noexcept {
  const std::size_t n = text.size() < N - 1 ? text.size() : N - 1;
  if (n != 0) std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace c_api

/// The status a kiln_ function returns for `error`: by its kind (KILN_ERROR_INTERNAL for io, remote
/// and internal). Outside the hidden namespace so tests/unit/test_error_kinds.cpp checks this very mapping.
kiln_status c_status_of(const Error& error) noexcept;

}  // namespace kiln

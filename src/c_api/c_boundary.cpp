#include "c_boundary.hpp"

#include <exception>
#include <new>

namespace kiln {
namespace c_api __attribute__((visibility("hidden"))) {

namespace {

// Why a fixed fallback: recording a message can itself run out of memory, and the boundary must
// still return a status with some text.
constexpr const char* OUT_OF_MEMORY_TEXT = "out of host memory";

thread_local std::string error_text;
thread_local const char* error_fallback = nullptr;

void record(const char* message) noexcept {
  try {
    error_text = message;
    error_fallback = nullptr;
  } catch (...) {
    error_fallback = OUT_OF_MEMORY_TEXT;
  }
}

}  // namespace

bool is_invalid_argument(const kiln::Error& error) noexcept { return error.kind() == ErrorKind::invalid_argument; }

void clear_last_error() noexcept {
  error_text.clear();
  error_fallback = nullptr;
}

const char* last_error() noexcept { return error_fallback != nullptr ? error_fallback : error_text.c_str(); }

kiln_status status_of_current_exception() noexcept {
  try {
    throw;
  } catch (const StatusError& error) {
    record(error.what());
    return error.status();
  } catch (const kiln::Error& error) {
    record(error.what());
    return kiln::c_status_of(error);
  } catch (const std::bad_alloc&) {
    record(OUT_OF_MEMORY_TEXT);
    return KILN_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& error) {
    record(error.what());
    return KILN_ERROR_INTERNAL;
  } catch (...) {
    record("unknown exception inside kiln");
    return KILN_ERROR_INTERNAL;
  }
}

void require_pointer(const void* pointer, const char* name) {
  if (pointer == nullptr) throw_invalid_argument(name, "a non-null pointer", "null");
}

}  // namespace c_api

kiln_status c_status_of(const Error& error) noexcept {
  // Why io, remote and internal share a status: kiln.h has none of their own, and its values are ABI.
  switch (error.kind()) {
    case ErrorKind::invalid_argument: return KILN_ERROR_INVALID_ARGUMENT;
    case ErrorKind::unavailable: return KILN_ERROR_UNAVAILABLE;
    case ErrorKind::driver: return KILN_ERROR_DRIVER;
    case ErrorKind::compile: return KILN_ERROR_COMPILE;
    case ErrorKind::io:
    case ErrorKind::remote:
    case ErrorKind::internal: return KILN_ERROR_INTERNAL;
  }
  return KILN_ERROR_INTERNAL;
}

}  // namespace kiln

extern "C" const char* kiln_last_error(void) { return kiln::c_api::last_error(); }

extern "C" const char* kiln_status_string(kiln_status status) {
  switch (status) {
    case KILN_OK: return "ok";
    case KILN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case KILN_ERROR_UNAVAILABLE: return "unavailable";
    case KILN_ERROR_DRIVER: return "CUDA driver error";
    case KILN_ERROR_COMPILE: return "NVRTC compile error";
    case KILN_ERROR_OUT_OF_MEMORY: return "out of host memory";
    case KILN_ERROR_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

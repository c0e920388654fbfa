#pragma once
/// @file
/// kiln's one exception type. Thrown for programming and setup errors; paths that return kernel
/// handles log and return 0 instead.

#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/export.hpp"

namespace kiln {

/// What failed, set where the error is raised. The C ABI's status (docs/embedding.md, "Errors")
/// follows from it, never from the message or the call's name.
enum class ErrorKind {
  internal,          ///< anything else: a setup error (a bad `KILN_ARCH`) or a bug. The default
  invalid_argument,  ///< a caller's value is wrong (throw_invalid_argument)
  unavailable,       ///< cannot be done here: no GPU or kernel, `KILN_JIT=off` miss, no NVRTC, an old driver
  driver,            ///< a CUDA driver call failed; `result` is its CUresult
  compile,           ///< an NVRTC call failed or returned nothing; `result` is its nvrtcResult
  io,                ///< a file or operating-system call failed (disk cache, `KILN_DUMP_DIR`, getrandom)
  remote,            ///< the Redis fleet tier failed
};

/// Whether the same request can pass later in this process, decided where the error is raised.
/// kiln's module cache remembers a permanent load failure and asks again after a transient one.
enum class Retry {
  transient,  ///< may pass next time: out of memory, I/O, NVRTC's internal failures. The default
  permanent,  ///< fails the same way on every try: a bad argument, a compile error, KILN_JIT=off
};

/// "internal", "invalid_argument", ... as the enumerator is spelled.
KILN_API const char* error_kind_name(ErrorKind kind) noexcept;

/// Where an error happened, as structured fields so callers and tests need not parse the message.
struct ErrorContext {
  std::string call;                  ///< API, NVRTC or driver call that failed, e.g. "cuModuleLoadData"
  std::string module;                ///< embedded module involved, if any
  std::string target;                ///< compile target, e.g. "sm_90a", if any
  std::vector<std::string> options;  ///< NVRTC options, for compile failures
  std::string log;                   ///< NVRTC log, for compile failures
  int result = 0;                    ///< the failed call's nvrtcResult or CUresult; 0 when none
  ErrorKind kind = ErrorKind::internal;
  Retry retry = Retry::transient;
};

// Why KILN_API on the class: its type info must be the library's, or an embedder's
// `catch (const kiln::Error&)` would not match what the library throws.
class KILN_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorContext context = {});
  const ErrorContext& context() const noexcept { return context_; }
  ErrorKind kind() const noexcept { return context_.kind; }
  Retry retry() const noexcept { return context_.retry; }
  bool permanent() const noexcept { return context_.retry == Retry::permanent; }

 private:
  ErrorContext context_;
};

/// Out of line so throwing sites stay small. Kind and retry come from `context` (by default
/// internal and transient).
[[noreturn]] KILN_API void throw_error(const std::string& message, ErrorContext context = {});

/// As above, with `context.kind` and `context.retry` set to `kind` and `retry`.
[[noreturn]] KILN_API void throw_error(ErrorKind kind, Retry retry, const std::string& message, ErrorContext context = {});

/// For bad arguments (kind invalid_argument, permanent): names the argument and what was
/// expected, e.g. `invalid argument 'k': expected a multiple of 128, got 100`.
[[noreturn]] KILN_API void throw_invalid_argument(const std::string& argument, const std::string& expected,
                                                  const std::string& got);

}  // namespace kiln

#pragma once
/// @file
/// kiln's one exception type. Thrown for programming and setup errors; paths that return kernel
/// handles log and return 0 instead.

#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

/// Where an error happened, as structured fields so callers and tests need not parse the message.
struct ErrorContext {
  std::string call;                  ///< API, NVRTC or driver call that failed, e.g. "cuModuleLoadData"
  std::string module;                ///< embedded module involved, if any
  std::string target;                ///< compile target, e.g. "sm_90a", if any
  std::vector<std::string> options;  ///< NVRTC options, for compile failures
  std::string log;                   ///< NVRTC log, for compile failures
  int result = 0;                    ///< the failed call's nvrtcResult or CUresult; 0 when none
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorContext context = {});
  const ErrorContext& context() const noexcept { return context_; }

 private:
  ErrorContext context_;
};

/// Out of line so throwing sites stay small.
[[noreturn]] void throw_error(const std::string& message, ErrorContext context = {});

/// For bad arguments: names the argument and what was expected, e.g.
/// `invalid argument 'k': expected a multiple of 128, got 100`.
[[noreturn]] void throw_invalid_argument(const std::string& argument, const std::string& expected,
                                         const std::string& got);

}  // namespace kiln

#include "kiln/error.hpp"

namespace kiln {

const char* error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::internal: return "internal";
    case ErrorKind::invalid_argument: return "invalid_argument";
    case ErrorKind::unavailable: return "unavailable";
    case ErrorKind::driver: return "driver";
    case ErrorKind::compile: return "compile";
    case ErrorKind::io: return "io";
    case ErrorKind::remote: return "remote";
  }
  return "unknown";
}

Error::Error(const std::string& message, ErrorContext context)
    : std::runtime_error(message), context_(std::move(context)) {}

void throw_error(const std::string& message, ErrorContext context) {
  throw Error(message, std::move(context));
}

void throw_error(ErrorKind kind, Retry retry, const std::string& message, ErrorContext context) {
  context.kind = kind;
  context.retry = retry;
  throw Error(message, std::move(context));
}

void throw_invalid_argument(const std::string& argument, const std::string& expected,
                            const std::string& got) {
  throw_error(ErrorKind::invalid_argument, Retry::permanent,
              "invalid argument '" + argument + "': expected " + expected + ", got " + got);
}

}  // namespace kiln

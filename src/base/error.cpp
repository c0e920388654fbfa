#include "kiln/error.hpp"

namespace kiln {

Error::Error(const std::string& message, ErrorContext context)
    : std::runtime_error(message), context_(std::move(context)) {}

void throw_error(const std::string& message, ErrorContext context) {
  throw Error(message, std::move(context));
}

void throw_invalid_argument(const std::string& argument, const std::string& expected,
                            const std::string& got) {
  throw Error("invalid argument '" + argument + "': expected " + expected + ", got " + got);
}

}  // namespace kiln

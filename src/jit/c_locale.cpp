#include "c_locale.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include "kiln/error.hpp"

namespace kiln::detail {

namespace {

[[noreturn]] void throw_locale_error(const char* call) {
  ErrorContext context;
  context.call = call;
  context.kind = ErrorKind::io;
  throw_error(std::string(call) + " failed: " + std::strerror(errno), context);
}

locale_t c_locale() {
  // Why never freed: one immutable locale object for the whole process, shared by every thread.
  static const locale_t locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
  if (locale == static_cast<locale_t>(nullptr))
    throw_locale_error("newlocale");
  return locale;
}

}  // namespace

ScopedCLocale::ScopedCLocale() : previous_(uselocale(c_locale())) {
  if (previous_ == static_cast<locale_t>(nullptr))
    throw_locale_error("uselocale");
}

ScopedCLocale::~ScopedCLocale() { uselocale(previous_); }

}  // namespace kiln::detail

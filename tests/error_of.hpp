#pragma once
// The message of the kiln::Error a call throws, or "" when it throws none: for tests that check an
// error names the right argument.

#include <functional>
#include <string>

#include "kiln/error.hpp"

namespace kiln::test {

inline std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace kiln::test

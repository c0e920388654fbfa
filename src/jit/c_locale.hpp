#pragma once
// The "C" locale for the calling thread only, for the length of a scope.

#include <locale.h>

namespace kiln::detail {

/// Why: older NVRTC parsed numbers through the C library's locale, so a process locale with a
/// decimal comma changed the code (jcuda/jcuda#4: under fr_FR, NVRTC 7.5 read 2.22e-16 as 2).
/// NVRTC 13.0 is not affected (tests/unit/test_compiler.cpp compares PTX under de_DE), but kiln also
/// runs on older ones. uselocale() changes only the calling thread, so compiles on other threads
/// and the embedding application's own locale are untouched. Throws kiln::Error if the C locale
/// cannot be created or installed.
class ScopedCLocale {
 public:
  ScopedCLocale();
  ~ScopedCLocale();
  ScopedCLocale(const ScopedCLocale&) = delete;
  ScopedCLocale& operator=(const ScopedCLocale&) = delete;

 private:
  locale_t previous_;
};

}  // namespace kiln::detail

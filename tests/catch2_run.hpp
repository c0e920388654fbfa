#pragma once
// The exit status of a Catch2 run, for Meson. Why not Catch2's own: 2.x exits with the number of
// failed assertions (capped at 255), so a run with exactly 77 failures would read as Meson's
// "skipped", and a test filter ("[pdl]") that matches nothing exits 0 having run nothing.
// Include after defining CATCH_CONFIG_RUNNER, in the one file that holds main().
#include <catch2/catch.hpp>

namespace kiln::test {

inline int run_catch2(int argc, char** argv) {
  Catch::Session session;
  if (session.applyCommandLine(argc, argv) != 0) return 1;
  Catch::ConfigData& config = session.configData();
  config.warnings = static_cast<Catch::WarnAbout::What>(config.warnings | Catch::WarnAbout::NoTests);
  return session.run() == 0 ? 0 : 1;
}

}  // namespace kiln::test

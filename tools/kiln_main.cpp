// The kiln command line: one file per subcommand (tools/cmd_*.cpp), registered here.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kiln: JIT kernels for NVIDIA GPUs, compiled with NVRTC for the GPU at hand"};
  app.set_version_flag("--version", std::string(kiln::version_string()));
  app.require_subcommand(1);
  kiln::cli::add_all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 1;
  }
  return kiln::cli::exit_code();
}

// The kiln command line: one file per subcommand (tools/cmd_*.cpp), registered here.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_common.hpp"
#include "commands.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"

namespace {

/// CLI11's own exit codes (104-114, one per kind of parse error) are replaced by one usage status,
/// so a script tells "you called it wrong" (2) from "it failed" (1) without a table.
int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  std::string message = kiln::cli::usage_message(e);
  // The command reached (`kiln`, `kiln cache`, ...) and the words that named it.
  const CLI::App* command = &app;
  std::vector<std::string> path;
  while (!command->get_subcommands().empty()) {
    command = command->get_subcommands().front();
    path.push_back(command->get_name());
  }
  const auto known = command->get_subcommands([](const CLI::App* sub) { return !sub->get_group().empty(); });
  // Why: a command that needs a subcommand gets from CLI11 only "A subcommand is required", even
  // for a misspelt one or an unknown option; naming the word and the choices is the useful answer.
  if (!known.empty()) {
    std::string commands;
    for (const auto* sub : known) commands += (commands.empty() ? "" : ", ") + sub->get_name();
    std::size_t named = 0;
    for (int i = 1; i < argc; ++i) {
      const std::string word = argv[i];
      if (named < path.size() && word == path[named]) {
        ++named;
        continue;
      }
      message = (word[0] == '-' ? "unknown option '" : "unknown command '") + word + "'";
      break;
    }
    std::string where = "kiln";
    for (const auto& name : path) where += " " + name;
    message += " (commands of '" + where + "': " + commands + ")";
  }
  std::fprintf(stderr, "kiln: %s\nRun 'kiln --help' or 'kiln COMMAND --help' for the options.\n", message.c_str());
  return kiln::cli::EXIT_USAGE;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: JIT kernels for NVIDIA GPUs, compiled with NVRTC for the GPU at hand"};
  app.set_version_flag("--version", std::string(kiln::version_string()));
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success; 1 failure (a compile, a write, a check, a bad KILN_ARCH); 2 usage error "
      "(unknown command or option, a missing or out-of-range value). A bad switch or number in a KILN_* "
      "variable is a warning and the default.");
  kiln::cli::add_all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e, argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return kiln::cli::EXIT_FAILED;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return kiln::cli::EXIT_FAILED;
  }
  return kiln::cli::exit_code();
}

// Fuzz target: the kiln command line's number parsing, through the real `pick` command
// (tools/cmd_pick.cpp: --m, --k, --sm-count, --twin) and CLI11's parser, as `kiln` builds it.
//
// Input: arguments separated by NUL bytes, after `kiln pick`; an argument that starts with `=`
// becomes `--m=`, `--k=` or `--sm-count=` plus the rest (chosen by its second byte), so the
// fuzzer spends its time on the numbers. Invariant: every input ends in a parse (and the pick's
// printout) or a CLI::ParseError or kiln::Error, which `kiln` turns into a message and an exit
// status; anything else (another exception, a crash, undefined behaviour) is a bug. So is CLI11's
// bare "Could not convert" for a number option: its check (integer_in) must reject, with the
// option's range, every text that does not convert.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "kiln/error.hpp"

namespace {

std::vector<std::string> arguments(const std::uint8_t* data, std::size_t size) {
  static const char* const numbers[] = {"--m=", "--k=", "--sm-count="};
  std::vector<std::string> out{"pick"};
  std::string current;
  auto finish = [&] {
    if (current.size() >= 2 && current[0] == '=')
      current = numbers[static_cast<unsigned char>(current[1]) % 3] + current.substr(2);
    out.push_back(current);
    current.clear();
  };
  for (std::size_t i = 0; i < size && out.size() < 16; ++i) {
    if (data[i] == 0)
      finish();
    else
      current += static_cast<char>(data[i]);
  }
  if (!current.empty()) finish();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  CLI::App app{"kiln"};
  app.require_subcommand(1);
  kiln::cli::add_pick_command(app);
  std::vector<std::string> args = arguments(data, size);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ConversionError& e) {
    // Only the option the message names counts: another option's value may contain "--k ".
    const std::string message = e.what();
    for (const char* option : {"--m ", "--k ", "--sm-count "})
      if (message.rfind(std::string("Could not convert: ") + option, 0) == 0) {
        std::fprintf(stderr, "a number option reached CLI11's conversion unchecked: %s\n", e.what());
        std::abort();
      }
  } catch (const CLI::ParseError&) {
  } catch (const kiln::Error&) {
  }
  return 0;
}

#include <catch2/catch.hpp>

#include <string>

#include "jit/compile_log.hpp"

using namespace kiln;

namespace {

const char* const SOURCE =
    "#include \"bad.cuh\"\n"
    "extern \"C\" __global__ void k(float* p) {\n"
    "  p[0] = oops;\n"
    "  int x = 1\n"
    "}\n";
const char* const HEADER = "#pragma once\n__device__ inline int h() {\n  return undefined_h;\n}\n";

// What NVRTC 13.0 logs for SOURCE and HEADER (captured from a real compile).
const char* const LOG =
    "bad.cuh(3): error: identifier \"undefined_h\" is undefined\n"
    "    return undefined_h;\n"
    "           ^\n"
    "\n"
    "mod.cu(3): error: identifier \"oops\" is undefined\n"
    "    p[0] = oops;\n"
    "           ^\n"
    "\n"
    "mod.cu(4): warning #177-D: variable \"x\" was declared but never referenced\n"
    "    int x = 1\n"
    "        ^\n"
    "\n"
    "2 errors detected in the compilation of \"mod.cu\".\n";

}  // namespace

TEST_CASE("format_compile_log: numbered context around each error, caret kept") {
  const std::string out = format_compile_log(LOG, {{"mod.cu", SOURCE}, {"bad.cuh", HEADER}}, 1);
  CAPTURE(out);
  const std::string expected =
      "bad.cuh(3): error: identifier \"undefined_h\" is undefined\n"
      "    2 | __device__ inline int h() {\n"
      "  > 3 |   return undefined_h;\n"
      "      |          ^\n"
      "    4 | }\n"
      "\n"
      "mod.cu(3): error: identifier \"oops\" is undefined\n"
      "    2 | extern \"C\" __global__ void k(float* p) {\n"
      "  > 3 |   p[0] = oops;\n"
      "      |          ^\n"
      "    4 |   int x = 1\n"
      "\n"
      "mod.cu(4): warning #177-D: variable \"x\" was declared but never referenced\n"
      "    int x = 1\n"
      "        ^\n"
      "\n"
      "2 errors detected in the compilation of \"mod.cu\".\n";
  CHECK(out == expected);
}

TEST_CASE("format_compile_log: context clamps at the file's ends and widens the number column") {
  std::string longer;
  for (int i = 1; i <= 12; ++i) longer += "line" + std::to_string(i) + "\n";
  const std::string first = format_compile_log("m.cu(1): error: bad start\n", {{"m.cu", longer}}, 2);
  CHECK(first == "m.cu(1): error: bad start\n  > 1 | line1\n    2 | line2\n    3 | line3\n");
  const std::string last = format_compile_log("m.cu(12): catastrophic error: bad end\n", {{"m.cu", longer}}, 2);
  CHECK(last == "m.cu(12): catastrophic error: bad end\n    10 | line10\n    11 | line11\n  > 12 | line12\n");
}

TEST_CASE("format_compile_log: unknown files, lines past the end and other lines pass through") {
  const std::string log =
      "other.cu(2): error: not ours\n"
      "    x\n"
      "\n"
      "m.cu(99): error: past the end\n"
      "Command-line error: invalid option\n"
      "m.cu(x): error: not a line number\n";
  CHECK(format_compile_log(log, {{"m.cu", "a\nb\n"}}) == log);
  CHECK(format_compile_log("", {{"m.cu", "a\n"}}).empty());
}

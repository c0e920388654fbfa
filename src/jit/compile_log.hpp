#pragma once
/// @file
/// NVRTC logs made readable: each error shown with the numbered source lines around it. Pure.

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// One file NVRTC saw, by the name it uses in its log (`per_token_group_quant_fp8.cu`, `fp8_e4m3.cuh`).
struct SourceText {
  std::string_view name;
  std::string_view text;
};

/// `log` with every error (`name(line): error: ...` and `catastrophic error`) whose file is in
/// `files` followed by the `context_lines` lines before and after it, numbered, the error line
/// marked `>` and, when NVRTC gave one, a caret under the column. NVRTC's own one-line echo of that
/// error is replaced; warnings, remarks and errors in unknown files or lines pass through unchanged.
std::string format_compile_log(std::string_view log, const std::vector<SourceText>& files,
                               int context_lines = 2);

}  // namespace kiln

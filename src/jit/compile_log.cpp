#include "jit/compile_log.hpp"

#include <algorithm>
#include <optional>

namespace kiln {

namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

struct Location {
  std::string_view file;
  int line = 0;
};

/// `name(123): error: ...` or `name(123): catastrophic error: ...`.
std::optional<Location> error_location(std::string_view line) {
  const auto open = line.find('(');
  if (open == 0 || open == std::string_view::npos) return std::nullopt;
  const auto close = line.find("): ", open);
  if (close == std::string_view::npos || close == open + 1 || close - open > 9) return std::nullopt;
  int number = 0;
  for (char c : line.substr(open + 1, close - open - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    number = number * 10 + (c - '0');
  }
  const auto kind = line.substr(close + 3);
  if (kind.substr(0, 6) != "error:" && kind.substr(0, 6) != "error " && kind.substr(0, 18) != "catastrophic error")
    return std::nullopt;
  return Location{line.substr(0, open), number};
}

/// NVRTC follows an error with the source line and a caret line (`   ^`), indented by two.
std::optional<std::size_t> caret_column(const std::vector<std::string_view>& block) {
  for (auto line : block) {
    const auto caret = line.find('^');
    if (caret == std::string_view::npos || caret < 2) continue;
    if (line.find_first_not_of(' ') == caret && line.find_first_not_of(' ', caret + 1) == std::string_view::npos)
      return caret - 2;
  }
  return std::nullopt;
}

std::string padded(int number, std::size_t width) {
  std::string text = std::to_string(number);
  return std::string(width > text.size() ? width - text.size() : 0, ' ') + text;
}

}  // namespace

std::string format_compile_log(std::string_view log, const std::vector<SourceText>& files, int context_lines) {
  const auto lines = split_lines(log);
  context_lines = std::max(context_lines, 0);
  std::string out;
  for (std::size_t i = 0; i < lines.size();) {
    const auto location = error_location(lines[i]);
    const auto file = location ? std::find_if(files.begin(), files.end(),
                                              [&](const SourceText& f) { return f.name == location->file; })
                               : files.end();
    const auto source = file != files.end() ? split_lines(file->text) : std::vector<std::string_view>{};
    if (file == files.end() || location->line < 1 || location->line > static_cast<int>(source.size())) {
      out.append(lines[i]).append("\n");
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    while (end < lines.size() && !lines[end].empty()) ++end;
    const auto column = caret_column({lines.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                      lines.begin() + static_cast<std::ptrdiff_t>(end)});

    const int first = std::max(1, location->line - context_lines);
    const int last = std::min(static_cast<int>(source.size()), location->line + context_lines);
    const std::size_t width = std::to_string(last).size();
    out.append(lines[i]).append("\n");
    for (int n = first; n <= last; ++n) {
      out.append(n == location->line ? "  > " : "    ").append(padded(n, width)).append(" | ");
      out.append(source[static_cast<std::size_t>(n - 1)]).append("\n");
      if (n == location->line && column)
        out.append(4 + width, ' ').append(" | ").append(*column, ' ').append("^\n");
    }
    i = end;
  }
  return out;
}

}  // namespace kiln

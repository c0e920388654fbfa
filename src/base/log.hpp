#pragma once
/// @file
/// kiln's logger: spdlog, named "kiln", level from `KILN_LOG_LEVEL` (trace, debug, info, warn,
/// error, critical, off; default warn). Created once, on first use.

#include <cstdio>
#include <memory>
#include <string_view>

#include <spdlog/spdlog.h>

namespace kiln {

spdlog::logger& logger();

/// For a child process of `kiln` (`kiln worker`): every message of this process's logger goes to
/// `out` as one line, `log <level> <text>` (backslashes and newlines escaped), instead of stderr,
/// so the parent prints it (log_from_child) and a warning the whole process tree shares (a bad
/// KILN_* setting) is printed once. Call before anything logs.
void log_to_parent(std::FILE* out);

/// In the parent: logs what a child wrote after "log " (see log_to_parent), unless it is a warning
/// or worse whose text this process already printed, itself or from another child. A line that is
/// not in that form is logged as a warning, as it came.
void log_from_child(std::string_view line);

/// Whether this process already printed a warning (or worse) whose text contains `text`. For a
/// second consequence of one cause (a key file that cannot be read stops both the bundles and the
/// remote tier): the cause is then not printed again.
bool warned_about(std::string_view text);

}  // namespace kiln

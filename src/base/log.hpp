#pragma once
/// @file
/// kiln's logger: spdlog, named "kiln", level from `KILN_LOG_LEVEL` (trace, debug, info, warn,
/// error, critical, off; default warn). Created once, on first use.

#include <memory>

#include <spdlog/spdlog.h>

namespace kiln {

spdlog::logger& logger();

}  // namespace kiln

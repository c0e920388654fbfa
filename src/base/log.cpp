#include "base/log.hpp"

#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace kiln {

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    auto existing = spdlog::get("kiln");
    if (existing) return existing;  // the embedding process registered its own "kiln" logger
    auto created = spdlog::stderr_color_mt("kiln");
    created->set_level(spdlog::level::warn);
    if (const char* level = std::getenv("KILN_LOG_LEVEL")) {
      auto parsed = spdlog::level::from_str(level);
      // Why: from_str maps unknown names to "off", which would hide the warning about them.
      if (parsed == spdlog::level::off && std::string_view(level) != "off")
        created->warn("KILN_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, critical, off); using warn", level);
      else
        created->set_level(parsed);
    }
    return created;
  }();
  return *instance;
}

}  // namespace kiln

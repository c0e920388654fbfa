#include "base/log.hpp"

#include <mutex>
#include <set>
#include <string>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "base/config.hpp"

namespace kiln {

namespace {

/// Texts of the warnings (and worse) this process printed, its own and its children's, so that
/// one warning is printed once for the process tree. Bounded: past the bound a repeat is printed,
/// which costs a line, not a message.
struct Printed {
  std::mutex mutex;
  std::set<std::string, std::less<>> texts, from_children;
  static constexpr std::size_t bound = 4096;

  static void add_to(std::set<std::string, std::less<>>& set, std::string_view text) {
    if (set.size() < bound) set.emplace(text);
  }
  void add(std::string_view text, bool from_child) {
    const std::lock_guard<std::mutex> lock(mutex);
    add_to(texts, text);
    if (from_child) add_to(from_children, text);
  }
  bool has(std::string_view text) {
    const std::lock_guard<std::mutex> lock(mutex);
    return texts.find(text) != texts.end();
  }
  bool from_child(std::string_view text) {
    const std::lock_guard<std::mutex> lock(mutex);
    return from_children.find(text) != from_children.end();
  }
  bool contains(std::string_view part) {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const auto& text : texts)
      if (text.find(part) != std::string::npos) return true;
    return false;
  }
};

Printed& printed() {
  static Printed instance;
  return instance;
}

/// Set while log_from_child logs a child's message through this process's logger.
thread_local bool forwarding = false;

/// kiln's stderr sink: records the warnings it prints, and drops one of this process's own that a
/// child (a `kiln worker`) printed already, so that the tree prints it once.
class StderrSink final : public spdlog::sinks::stderr_color_sink_mt {
 public:
  void log(const spdlog::details::log_msg& msg) override {
    if (msg.level >= spdlog::level::warn) {
      const std::string_view text(msg.payload.data(), msg.payload.size());
      if (!forwarding && printed().from_child(text)) return;
      printed().add(text, forwarding);
    }
    spdlog::sinks::stderr_color_sink_mt::log(msg);
  }
};

/// A child's sink: one escaped line per message on the parent's pipe. It records its warnings as
/// the stderr sink does, so warned_about() answers in a child too.
class ParentSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ParentSink(std::FILE* out) : out_(out) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level >= spdlog::level::warn) printed().add({msg.payload.data(), msg.payload.size()}, false);
    std::string line = "log ";
    const auto level = spdlog::level::to_string_view(msg.level);
    line.append(level.data(), level.size());
    line += ' ';
    for (const char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      if (c == '\\')
        line += "\\\\";
      else if (c == '\n')
        line += "\\n";
      else
        line += c;
    }
    line += '\n';
    // Why one fwrite: stdio locks the stream per call, so the line never interleaves with the
    // child's other report lines on the same stream.
    std::fwrite(line.data(), 1, line.size(), out_);
    std::fflush(out_);
  }
  void flush_() override { std::fflush(out_); }

 private:
  std::FILE* out_;
};

std::FILE* parent_stream = nullptr;

}  // namespace

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    const Config& config = process_config_unlogged();
    auto created = spdlog::get("kiln");  // the embedding process may have registered its own "kiln" logger
    if (!created) {
      if (parent_stream != nullptr)
        created = std::make_shared<spdlog::logger>("kiln", std::make_shared<ParentSink>(parent_stream));
      else
        created = std::make_shared<spdlog::logger>("kiln", std::make_shared<StderrSink>());
      spdlog::register_logger(created);
      created->set_level(spdlog::level::from_str(config.log_level));
    }
    // Why here: each bad value of the process configuration is told once, whoever logs first.
    for (const auto& warning : config.warnings) created->warn("{}", warning);
    return created;
  }();
  return *instance;
}

void log_to_parent(std::FILE* out) {
  parent_stream = out;
  spdlog::logger& log = logger();
  // Why again: the logger may have been made before this call, with the stderr sink.
  log.sinks().clear();
  log.sinks().push_back(std::make_shared<ParentSink>(out));
}

bool warned_about(std::string_view text) {
  logger();  // Why: the logger records what it prints only once it exists
  return !text.empty() && printed().contains(text);
}

void log_from_child(std::string_view line) {
  const auto space = line.find(' ');
  auto level = spdlog::level::from_str(std::string(line.substr(0, space)));
  std::string text;
  if (space == std::string_view::npos || (level == spdlog::level::off && line.substr(0, space) != "off")) {
    level = spdlog::level::warn;
    text = std::string(line);
  } else {
    const std::string_view escaped = line.substr(space + 1);
    for (std::size_t i = 0; i < escaped.size(); ++i) {
      if (escaped[i] == '\\' && i + 1 < escaped.size()) {
        text += escaped[i + 1] == 'n' ? '\n' : escaped[i + 1];
        ++i;
      } else {
        text += escaped[i];
      }
    }
  }
  if (level >= spdlog::level::warn && printed().has(text)) return;
  forwarding = true;
  logger().log(level, "{}", text);
  forwarding = false;
}

}  // namespace kiln

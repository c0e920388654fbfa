// kiln cache stats|verify|clear: look after the disk cache this environment selects.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/disk/disk_cache.hpp"
#include "commands.hpp"

namespace kiln::cli {

namespace {

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

nlohmann::json status_json(const DiskCache& cache) {
  const auto status = cache.status();
  return {{"dir", status.dir}, {"mode", std::string(to_string(status.mode))}, {"reason", status.reason},
          {"max_bytes", cache.config().max_bytes}};
}

/// Whether the cache is in use. If not, prints where it is and why: for `stats`, as its report
/// (exit status 0); for a command that had work to do (`failed`: "checked nothing", "removed
/// nothing") as `kiln cache COMMAND: ...`, a failure on stderr with exit status 1 (and `error` and
/// `field`: `value` in the JSON).
bool usable(const DiskCache& cache, bool json, const char* command = nullptr, const char* failed = nullptr,
            const char* field = nullptr, const nlohmann::json& value = nullptr) {
  const auto status = cache.status();
  if (status.mode == DiskCacheMode::read_write) return true;
  const std::string where = "the disk cache is " + std::string(to_string(status.mode)) +
                            (status.dir.empty() ? "" : " at '" + status.dir + "'") + " (" + status.reason + ")";
  if (command != nullptr) {
    set_exit_code(1);
    const std::string error = std::string(failed) + ": " + where;
    if (json) {
      auto out = status_json(cache);
      out["error"] = error;
      out[field] = value;
      std::printf("%s\n", out.dump(2).c_str());
    }
    std::fprintf(stderr, "kiln cache %s: %s\n", command, error.c_str());
    return false;
  }
  if (json)
    std::printf("%s\n", status_json(cache).dump(2).c_str());
  else
    std::printf("disk cache %s%s%s: %s\n", std::string(to_string(status.mode)).c_str(),
                status.dir.empty() ? "" : " at ", status.dir.c_str(), status.reason.c_str());
  return false;
}

void stats(bool json) {
  DiskCache cache = DiskCache::from_env();
  if (!usable(cache, json)) return;
  const auto stats = cache.stats();
  if (json) {
    auto out = status_json(cache);
    out["entries"] = stats.entries;
    out["bytes"] = stats.bytes;
    out["temp_files"] = stats.temp_files;
    out["lock_files"] = stats.lock_files;
    out["per_target"] = nlohmann::json::object();
    for (const auto& [target, counts] : stats.per_target)
      out["per_target"][target] = {{"entries", counts.entries}, {"bytes", counts.bytes}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("disk cache at %s\n", cache.status().dir.c_str());
  std::printf("%llu entries, %s of %s\n", static_cast<unsigned long long>(stats.entries),
              human_bytes(stats.bytes).c_str(), human_bytes(cache.config().max_bytes).c_str());
  for (const auto& [target, counts] : stats.per_target)
    std::printf("  %-12s %6llu entries  %s\n", target.c_str(), static_cast<unsigned long long>(counts.entries),
                human_bytes(counts.bytes).c_str());
  std::printf("%llu temporary files, %llu lock files\n", static_cast<unsigned long long>(stats.temp_files),
              static_cast<unsigned long long>(stats.lock_files));
}

void verify(bool json) {
  DiskCache cache = DiskCache::from_env();
  if (!usable(cache, json, "verify", "checked nothing", "checked", false)) return;
  const auto report = cache.verify();
  if (!report.bad.empty()) set_exit_code(1);
  if (json) {
    auto bad = nlohmann::json::array();
    for (const auto& entry : report.bad) bad.push_back({{"file", entry.file}, {"reason", entry.reason}});
    auto skipped = nlohmann::json::array();
    for (const auto& entry : report.skipped) skipped.push_back({{"file", entry.file}, {"reason", entry.reason}});
    auto out = status_json(cache);
    out["checked"] = true;
    out["good"] = report.good;
    out["bad"] = bad;
    out["skipped"] = skipped;
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  for (const auto& entry : report.bad) std::printf("bad: %s: %s\n", entry.file.c_str(), entry.reason.c_str());
  // Why not bad: another process may run with a larger KILN_CACHE_MAX_BYTES and use these.
  for (const auto& entry : report.skipped)
    std::printf("not checked: %s: %s\n", entry.file.c_str(), entry.reason.c_str());
  std::printf("%llu good, %zu bad, %zu not checked (larger than this process's bound) entries in %s\n",
              static_cast<unsigned long long>(report.good), report.bad.size(), report.skipped.size(),
              cache.status().dir.c_str());
}

void clear(bool json) {
  DiskCache cache = DiskCache::from_env();
  if (!usable(cache, json, "clear", "removed nothing", "removed", 0)) return;
  const auto removed = cache.clear();
  if (json) {
    auto out = status_json(cache);
    out["removed"] = removed;
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("removed %llu files from %s\n", static_cast<unsigned long long>(removed), cache.status().dir.c_str());
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("cache", "Inspect or clear the disk cache (KILN_CACHE_DIR, XDG_CACHE_HOME, ~/.cache); push to or pull from the remote cache");
  cmd->require_subcommand(1);
  struct Action {
    const char* name;
    const char* help;
    void (*run)(bool json);
  };
  auto* stats_cmd = cmd->add_subcommand("stats", "Entries and bytes, per target");
  auto* stats_json = stats_cmd->add_flag("--json", "Print JSON");
  auto* stats_remote = stats_cmd->add_flag("--remote", "The remote cache (KILN_REMOTE_CACHE) instead of the disk");
  stats_cmd->callback([stats_json, stats_remote] {
    (stats_remote->count() > 0 ? remote_stats : stats)(stats_json->count() > 0);
  });
  add_cache_remote_commands(*cmd);
  for (const auto& action : {Action{"verify", "Check every entry; list bad ones (exit status 1 if any)", verify},
                             Action{"clear", "Remove kiln's entries, temporary and lock files (nothing else)", clear}}) {
    auto* sub = cmd->add_subcommand(action.name, action.help);
    auto* json = sub->add_flag("--json", "Print JSON");
    sub->callback([json, run = action.run] { run(json->count() > 0); });
  }
}

}  // namespace kiln::cli

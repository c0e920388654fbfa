// kiln cache push|pull and stats --remote: move verified entries between this node's disk cache and
// the fleet's Redis (KILN_REMOTE_CACHE), for image builds and node pre-warms.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/disk/cache_folder.hpp"
#include "cache/disk/cache_scan.hpp"
#include "cache/disk/disk_cache.hpp"
#include "cache/disk/entry_file.hpp"
#include "cache/module_provider.hpp"
#include "cache/prefetch.hpp"
#include "cache/remote/remote_cache.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "jit/compiler.hpp"

namespace kiln::cli {

namespace {

/// The remote tier, or nothing (exit 1, the reason on stderr) when it is off.
std::shared_ptr<RemoteCache> remote_or_fail(const char* command) {
  auto remote = process_remote_cache();
  if (remote->enabled()) return remote;
  const auto status = remote->status();
  std::fprintf(stderr, "kiln cache %s: no remote cache: %s\n", command,
               status.reason.empty() ? "KILN_REMOTE_CACHE is not set" : status.reason.c_str());
  set_exit_code(EXIT_FAILED);
  return nullptr;
}

void push(bool json) {
  const auto remote = remote_or_fail("push");
  if (!remote) return;
  const auto disk = process_disk_cache();
  const auto status = disk->status();
  if (status.mode != DiskCacheMode::read_write) {
    std::fprintf(stderr, "kiln cache push: the disk cache is %s%s%s (%s): nothing to push\n",
                 std::string(to_string(status.mode)).c_str(), status.dir.empty() ? "" : " at ", status.dir.c_str(),
                 status.reason.c_str());
    set_exit_code(EXIT_FAILED);
    return;
  }
  // Why a fresh descriptor of the folder: the same checks as the cache's own (owner, mode, writable).
  const auto folder = detail::open_cache_folder(status.dir);
  if (folder.mode != DiskCacheMode::read_write) {
    std::fprintf(stderr, "kiln cache push: cannot use the disk cache at %s: %s\n", status.dir.c_str(),
                 folder.reason.c_str());
    set_exit_code(EXIT_FAILED);
    return;
  }
  std::string error;
  std::uint64_t stored = 0, present = 0, failed = 0, bad = 0, too_large = 0, unreadable = 0;
  for (const auto& file : detail::scan_cache_folder(folder.fd.get(), error)) {
    if (file.parsed.kind != detail::CacheFileKind::entry) continue;
    auto read = detail::read_entry_file(folder.fd.get(), file.name, file.parsed.key, disk->config().max_bytes, 0);
    // Why none of these is pushed: only what this node verified goes to the fleet.
    if (read.result == detail::EntryRead::Result::bad) {
      ++bad;
      continue;
    }
    if (read.result == detail::EntryRead::Result::too_large) {
      ++too_large;
      continue;
    }
    if (read.result == detail::EntryRead::Result::absent) {
      if (read.reason.empty()) continue;  // removed since the listing
      ++unreadable;
      std::fprintf(stderr, "kiln cache push: cannot read %s: %s\n", file.name.c_str(), read.reason.c_str());
      continue;
    }
    switch (remote->push(read.view.key, read.view.module, read.view.target, read.bytes)) {
      case RemoteCache::PushResult::stored: ++stored; break;
      case RemoteCache::PushResult::present: ++present; break;
      case RemoteCache::PushResult::failed: ++failed; break;
    }
  }
  if (!error.empty()) {
    ++failed;
    std::fprintf(stderr, "kiln cache push: %s: %s\n", status.dir.c_str(), error.c_str());
  }
  if (json)
    std::printf("%s\n", nlohmann::json{{"pushed", stored}, {"present", present}, {"failed", failed}, {"bad", bad},
                                       {"too_large", too_large}, {"unreadable", unreadable},
                                       {"remote", remote->status().endpoint}, {"dir", status.dir}}
                            .dump()
                            .c_str());
  else
    std::printf("pushed %llu entries to %s, %llu were there, %llu failed, %llu bad entries skipped, %llu larger "
                "than KILN_CACHE_MAX_BYTES skipped, %llu unreadable\n",
                static_cast<unsigned long long>(stored), remote->status().endpoint.c_str(),
                static_cast<unsigned long long>(present), static_cast<unsigned long long>(failed),
                static_cast<unsigned long long>(bad), static_cast<unsigned long long>(too_large),
                static_cast<unsigned long long>(unreadable));
  if (failed != 0 || unreadable != 0) set_exit_code(EXIT_FAILED);
}

void pull(const std::string& arch, bool json) {
  const auto remote = remote_or_fail("pull");
  if (!remote) return;
  const auto disk = process_disk_cache();
  const auto status = disk->status();
  if (status.mode != DiskCacheMode::read_write) {
    std::fprintf(stderr, "kiln cache pull: the disk cache is %s%s%s (%s): nowhere to keep entries\n",
                 std::string(to_string(status.mode)).c_str(), status.dir.empty() ? "" : " at ", status.dir.c_str(),
                 status.reason.c_str());
    set_exit_code(EXIT_FAILED);
    return;
  }
  const Compiler compiler;
  std::uint64_t pulled = 0, present = 0;
  std::vector<std::string> missing;
  for (const auto& target : requested_targets(arch)) {
    for (const KernelSource* source : carried_modules(target)) {
      const CacheKey key = module_cache_key(*source, target, compiler.options(target));
      if (disk->load(key, source->module, target)) {
        ++present;
        continue;
      }
      auto fetched = remote->fetch(key, source->module, target);
      if (fetched) {
        disk->store(key, *fetched);
        if (disk->load(key, source->module, target)) {
          ++pulled;
          continue;
        }
      }
      missing.push_back(source->module + " " + target.name());
    }
  }
  std::string names;
  for (const auto& name : missing) names += (names.empty() ? "" : ", ") + name;
  if (json) {
    nlohmann::json out{{"pulled", pulled}, {"present", present}, {"missing", missing},
                       {"remote", remote->status().endpoint}, {"dir", status.dir},
                       {"counters", remote_counters_json(remote->counters())}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("pulled %llu entries from %s into %s, %llu were there, %zu missing\n",
                static_cast<unsigned long long>(pulled), remote->status().endpoint.c_str(), status.dir.c_str(),
                static_cast<unsigned long long>(present), missing.size());
  }
  if (!missing.empty()) {
    std::fprintf(stderr, "kiln cache pull: %zu entries not in the remote cache or not kept: %s\n", missing.size(),
                 names.c_str());
    set_exit_code(EXIT_FAILED);
  }
}

}  // namespace

void remote_stats(bool json) {
  const auto remote = remote_or_fail("stats --remote");
  if (!remote) return;
  std::string error;
  const auto stats = remote->stats(error);
  if (!stats) {
    std::fprintf(stderr, "kiln cache stats --remote: %s\n", error.c_str());
    set_exit_code(EXIT_FAILED);
    return;
  }
  const auto status = remote->status();
  if (json) {
    nlohmann::json out{{"remote", status.endpoint}, {"signed", status.signed_entries}, {"entries", stats->entries},
                       {"bytes", stats->bytes}, {"leases", stats->leases}, {"per_target", nlohmann::json::object()}};
    for (const auto& [target, counts] : stats->per_target)
      out["per_target"][target] = {{"entries", counts.first}, {"bytes", counts.second}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("remote cache at %s (%s)\n%llu entries, %llu bytes, %llu leases held\n", status.endpoint.c_str(),
              status.signed_entries ? "signed" : "unsigned", static_cast<unsigned long long>(stats->entries),
              static_cast<unsigned long long>(stats->bytes), static_cast<unsigned long long>(stats->leases));
  for (const auto& [target, counts] : stats->per_target)
    std::printf("  %-12s %6llu entries  %llu bytes\n", target.c_str(), static_cast<unsigned long long>(counts.first),
                static_cast<unsigned long long>(counts.second));
}

void add_cache_remote_commands(CLI::App& cache) {
  auto* push_cmd = cache.add_subcommand("push", "Copy this node's verified entries to the remote cache (SET NX)");
  auto* push_json = push_cmd->add_flag("--json", "Print JSON");
  push_cmd->callback([push_json] { push(push_json->count() > 0); });

  auto arch = std::make_shared<std::string>("auto");
  auto* pull_cmd = cache.add_subcommand("pull", "Fetch the entries this node's targets need from the remote cache");
  pull_cmd->add_option("--arch", *arch, "Target: sm_90a, ...; auto (KILN_ARCH, else this GPU, else sm_90a); all");
  auto* pull_json = pull_cmd->add_flag("--json", "Print JSON");
  pull_cmd->callback([arch, pull_json] { pull(*arch, pull_json->count() > 0); });
}

}  // namespace kiln::cli

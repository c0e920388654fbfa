// kiln cache push|pull and stats --remote: move verified entries between this node's disk cache and
// the fleet's Redis (KILN_REMOTE_CACHE), for image builds and node pre-warms.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/disk/cache_folder.hpp"
#include "cache/disk/cache_scan.hpp"
#include "cache/disk/disk_cache.hpp"
#include "cache/disk/entry_file.hpp"
#include "runtime/module_provider.hpp"
#include "runtime/prefetch.hpp"
#include "cache/remote/remote_cache.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "jit/compiler.hpp"

namespace kiln::cli {

namespace {

std::string joined(const std::vector<std::string>& names, const char* separator = ", ") {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : separator) + name;
  return out;
}

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
  std::uint64_t stored = 0, present = 0, failed = 0, bad = 0, too_large = 0, unreadable = 0, out_of_memory = 0;
  std::vector<std::string> wrong_type;
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
      case RemoteCache::PushResult::out_of_memory: ++out_of_memory; break;
      case RemoteCache::PushResult::wrong_type:
        wrong_type.push_back(RemoteCache::entry_key_named(read.view.key, read.view.module, read.view.target));
        break;
    }
  }
  // Why asked before the scan error is counted: that failure is the folder's, not Redis's.
  const std::string redis_failure = remote->last_failure();
  if (!error.empty()) {
    ++failed;
    std::fprintf(stderr, "kiln cache push: %s: %s\n", status.dir.c_str(), error.c_str());
  }
  const std::string endpoint = remote->status().endpoint;
  if (json) {
    std::printf("%s\n", nlohmann::json{{"pushed", stored}, {"present", present}, {"failed", failed},
                                       {"out_of_memory", out_of_memory}, {"wrong_type", wrong_type}, {"bad", bad},
                                       {"too_large", too_large}, {"unreadable", unreadable}, {"remote", endpoint},
                                       {"dir", status.dir}, {"counters", remote_counters_json(remote->counters())}}
                            .dump()
                            .c_str());
  } else {
    std::string extra;
    if (out_of_memory != 0) extra += ", " + std::to_string(out_of_memory) + " refused: out of memory (maxmemory reached)";
    if (!wrong_type.empty()) extra += ", " + std::to_string(wrong_type.size()) + " keys of another Redis type skipped";
    std::printf("pushed %llu entries to %s, %llu were there, %llu failed%s, %llu bad entries skipped, %llu larger "
                "than KILN_CACHE_MAX_BYTES skipped, %llu unreadable\n",
                static_cast<unsigned long long>(stored), endpoint.c_str(), static_cast<unsigned long long>(present),
                static_cast<unsigned long long>(failed), extra.c_str(), static_cast<unsigned long long>(bad),
                static_cast<unsigned long long>(too_large), static_cast<unsigned long long>(unreadable));
  }
  if (out_of_memory != 0)
    std::fprintf(stderr,
                 "kiln cache push: %llu entries not stored: Redis at %s is out of memory (maxmemory reached); free "
                 "memory there or raise its maxmemory\n",
                 static_cast<unsigned long long>(out_of_memory), endpoint.c_str());
  if (failed != 0 && !redis_failure.empty())
    std::fprintf(stderr, "kiln cache push: entries not stored: %s\n", redis_failure.c_str());
  if (!wrong_type.empty())
    std::fprintf(stderr, "kiln cache push: skipped %zu keys that hold another Redis type (not kiln's; left alone): %s\n",
                 wrong_type.size(), joined(wrong_type).c_str());
  if (failed != 0 || unreadable != 0 || out_of_memory != 0) set_exit_code(EXIT_FAILED);
}

void pull(const std::string& arch, const std::string& variants, bool json) {
  // Why first: a bad manifest is a usage error before anything is fetched.
  const auto manifest =
      variants.empty() ? std::vector<const KernelSource*>{} : variant_manifest_sources(variants);
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
  // Each entry not pulled, by what happened to it: say what happened, never a guess.
  std::vector<std::string> missing, absent, refused, refused_why, wrong_type, unavailable, not_kept;
  std::string unavailable_why;
  for (const auto& [source, target] : modules_for(requested_targets(arch), manifest)) {
    const CacheKey key = module_cache_key(*source, target, compiler.options(target));
    if (disk->load(key, source->module, target)) {
      ++present;
      continue;
    }
    const std::string name = source->module + " " + target.name();
    FetchReport report;
    auto fetched = remote->fetch(key, source->module, target, &report);
    if (fetched) {
      disk->store(key, *fetched);
      if (disk->load(key, source->module, target)) {
        ++pulled;
        continue;
      }
      not_kept.push_back(name);
    } else {
      const std::string redis_key = RemoteCache::entry_key(key, source->module, target);
      switch (report.outcome) {
        case FetchOutcome::hit:
        case FetchOutcome::absent: absent.push_back(name); break;
        case FetchOutcome::refused:
          refused.push_back(redis_key);
          refused_why.push_back(redis_key + ": " + report.detail);
          break;
        case FetchOutcome::wrong_type: wrong_type.push_back(redis_key); break;
        case FetchOutcome::unavailable:
          unavailable.push_back(name);
          if (unavailable_why.empty()) unavailable_why = report.detail;
          break;
      }
    }
    missing.push_back(name);
  }
  // Why the latest failure rather than the first detail: later lookups only say the tier rests.
  if (!unavailable.empty() && !remote->last_failure().empty()) unavailable_why = remote->last_failure();
  const std::string endpoint = remote->status().endpoint;
  if (json) {
    nlohmann::json out{{"pulled", pulled}, {"present", present}, {"missing", missing}, {"absent", absent},
                       {"refused", refused}, {"wrong_type", wrong_type}, {"unavailable", unavailable},
                       {"not_kept", not_kept}, {"remote", endpoint}, {"dir", status.dir},
                       {"counters", remote_counters_json(remote->counters())}};
    if (!unavailable.empty()) out["error"] = unavailable_why;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("pulled %llu entries from %s into %s, %llu were there, %zu missing\n",
                static_cast<unsigned long long>(pulled), endpoint.c_str(), status.dir.c_str(),
                static_cast<unsigned long long>(present), missing.size());
  }
  if (!absent.empty())
    std::fprintf(stderr, "kiln cache pull: %zu entries not in the remote cache at %s: %s\n", absent.size(),
                 endpoint.c_str(), joined(absent).c_str());
  if (!refused.empty())
    std::fprintf(stderr, "kiln cache pull: %zu entries refused: %s\n", refused.size(), joined(refused_why, "; ").c_str());
  if (!wrong_type.empty())
    std::fprintf(stderr, "kiln cache pull: %zu keys hold another Redis type (not kiln's; left alone): %s\n",
                 wrong_type.size(), joined(wrong_type).c_str());
  if (!unavailable.empty())
    std::fprintf(stderr, "kiln cache pull: %zu entries not fetched: %s\n", unavailable.size(),
                 unavailable_why.c_str());
  if (!not_kept.empty())
    std::fprintf(stderr, "kiln cache pull: %zu entries fetched but not kept in %s (see the warnings above): %s\n",
                 not_kept.size(), status.dir.c_str(), joined(not_kept).c_str());
  if (!missing.empty()) set_exit_code(EXIT_FAILED);
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
                       {"bytes", stats->bytes}, {"leases", stats->leases}, {"per_target", nlohmann::json::object()},
                       {"wrong_type", stats->wrong_type}};
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
  if (!stats->wrong_type.empty())
    std::printf("%zu keys of another Redis type skipped (not kiln's; left alone): %s\n", stats->wrong_type.size(),
                joined(stats->wrong_type).c_str());
}

void add_cache_remote_commands(CLI::App& cache) {
  auto* push_cmd = cache.add_subcommand("push", "Copy this node's verified entries to the remote cache (SET NX)");
  auto* push_json = push_cmd->add_flag("--json", "Print JSON");
  push_cmd->callback([push_json] { push(push_json->count() > 0); });

  auto arch = std::make_shared<std::string>("auto");
  auto* pull_cmd = cache.add_subcommand("pull", "Fetch the entries this node's targets need from the remote cache");
  pull_cmd->add_option("--arch", *arch, "Target: sm_90a, ...; auto (KILN_ARCH, else this GPU, else sm_90a); all");
  auto variants = std::make_shared<std::string>();
  pull_cmd->add_option("--variants", *variants, "Also pull the variants this manifest lists (as kiln warm --variants)")
      ->check(existing_file("a variant manifest file"));
  auto* pull_json = pull_cmd->add_flag("--json", "Print JSON");
  pull_cmd->callback([arch, variants, pull_json] { pull(*arch, *variants, pull_json->count() > 0); });
}

}  // namespace kiln::cli

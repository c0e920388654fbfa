// kiln pack: one bundle file of every module (and variant) for every requested target, taken from
// the caches or compiled, for deployments where no compiler may run; --list shows one, --verify
// checks one. Format: src/cache/bundle/bundle_format.hpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/bundle/bundle_file.hpp"
#include "cache/bundle/bundle_format.hpp"
#include "cache/cache_path.hpp"
#include "cache/disk/cache_entry.hpp"
#include "cache/disk/entry_file.hpp"
#include "cache/disk/unique_fd.hpp"
#include "runtime/module_provider.hpp"
#include "runtime/prefetch.hpp"
#include "cli_common.hpp"
#include "cli_workers.hpp"
#include "commands.hpp"
#include "jit/compiler.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"
#include "kiln/error.hpp"

namespace kiln::cli {

namespace {

struct PackArgs {
  std::string arch;
  std::string variants;
  std::string out;
  std::string list;
  std::string verify;
  unsigned jobs = default_jobs();
  bool json = false;
  bool allow_unverified = false;
};

std::vector<Target> parse_arch_list(const std::string& text) {
  std::vector<Target> targets;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    const std::string one = text.substr(start, end - start);
    if (one.empty()) throw CLI::ValidationError("--arch", "expected a comma-separated list of targets, got '" + text + "'");
    for (const Target& target : requested_targets(one))
      if (std::find(targets.begin(), targets.end(), target) == targets.end()) targets.push_back(target);
    start = end + 1;
  }
  return targets;
}

/// The folder of `path` ("." for a bare name).
std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

/// `-o`, checked before anything compiles: a path that cannot be a bundle file (a folder, a path
/// under a regular file, in a missing folder) is a usage error; a folder kiln may not write in is a
/// failure. Why first: the rename at the end is the first write, after every compile.
void check_out_path(const std::string& path) {
  const auto refuse = [&](const std::string& why) {
    throw CLI::ValidationError("-o", "cannot write the bundle '" + path + "': " + why +
                                         " (expected a file path in an existing folder); nothing compiled");
  };
  if (path.empty() || path.back() == '/') refuse("it names a folder");
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) refuse("it is a folder");
    if (!S_ISREG(info.st_mode)) refuse("it exists and is not a regular file");
  }
  const std::string folder = folder_of(path);
  if (::stat(folder.c_str(), &info) != 0) refuse("the folder '" + folder + "': " + detail::errno_text(errno));
  if (!S_ISDIR(info.st_mode)) refuse("'" + folder + "' is not a folder");
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw_error("-o " + path + ": cannot write in the folder '" + folder + "': " + detail::errno_text(errno) +
                "; nothing compiled");
}

/// Writes `bytes` to `path` atomically (a temporary file beside it, fsynced, renamed), mode 0644:
/// a bundle is meant to be read by the services that use it, and written by nobody.
void write_bundle_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  const auto slash = path.rfind('/');
  const std::string folder = folder_of(path);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  detail::UniqueFd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw_error("-o " + path + ": cannot open the folder '" + folder + "': " + detail::errno_text(errno));
  if (const std::string error = detail::publish_entry_file(dir.get(), name, bytes, 0644); !error.empty())
    throw_error("-o " + path + ": " + error);
}

struct PackJob {
  const KernelSource* source;
  Target target;
  bundle::PackedEntry entry;
};

void pack(const PackArgs& args) {
  const std::string& build = nvrtc_build();
  if (build.empty()) throw_error("kiln pack needs NVRTC (its build names the bundle's keys): " + nvrtc_absence());
  const std::optional<bundle::SigningKey> key = bundle::signing_key_from_env();
  const std::vector<Target> targets = parse_arch_list(args.arch);
  check_out_path(args.out);
  std::vector<const KernelSource*> variants;
  if (!args.variants.empty()) variants = variant_manifest_sources(args.variants);

  const std::vector<WorkItem> work = modules_for(targets, variants);
  std::vector<PackJob> jobs;
  for (const auto& [source, target] : work) jobs.push_back(PackJob{source, target, {}});

  const Compiler compiler;
  const auto& layers = process_cache_path().layers;
  const ModuleProvider provider = make_module_provider(process_disk_cache(), compiler, layers);
  const ProvidedWork done = provide_all(
      work, provider, compiler, layers, args.jobs, "kiln pack", !args.json, [&](std::size_t i, ProvidedModule& provided) {
        PackJob& job = jobs[i];
        CompiledModule module = std::move(provided.module);
        // Why no time: the same inputs must give the same bundle bytes.
        module.compile_ms = 0;
        const std::vector<std::string> options = compiler.options(job.target);
        job.entry.key = module_cache_key(*job.source, job.target, options);
        job.entry.module = job.source->module;
        job.entry.target = job.target.name();
        job.entry.bytes = encode_entry(job.entry.key, module, build, 0);
      });

  std::vector<bundle::PackedEntry> entries;
  std::size_t failed = 0, cached = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (const std::string& error = done.items[i].error; !error.empty()) {
      ++failed;
      std::fprintf(stderr, "kiln pack: %s %s: %s\n", jobs[i].source->module.c_str(), jobs[i].target.name().c_str(),
                   error.c_str());
      continue;
    }
    cached += done.items[i].from_disk ? 1 : 0;
    entries.push_back(std::move(jobs[i].entry));
  }
  // Why: what the workers compiled, the parent then found in the disk cache.
  if (done.workers) cached = std::min(cached, done.worker_cached);
  if (failed != 0) {
    std::fprintf(stderr, "kiln pack: %zu of %zu modules failed; nothing written to %s\n", failed, jobs.size(),
                 args.out.c_str());
    set_exit_code(EXIT_FAILED);
    return;
  }
  const std::size_t count = entries.size();
  const auto bytes = bundle::encode_bundle(std::move(entries), build, key ? &*key : nullptr);
  write_bundle_file(args.out, bytes);
  if (args.json) {
    std::printf("%s\n", nlohmann::json{{"bundle", args.out}, {"entries", count}, {"bytes", bytes.size()},
                                       {"compiled", count - cached}, {"from_cache", cached},
                                       {"signed", key.has_value()}, {"nvrtc", build}}
                            .dump()
                            .c_str());
  } else {
    std::printf("%s: %zu entries (%zu compiled, %zu from the caches), %zu bytes, %s, NVRTC %s\n", args.out.c_str(),
                count, count - cached, cached, bytes.size(), key ? "signed" : "unsigned", build.c_str());
  }
}

nlohmann::json layer_json(const LayerReport& report) {
  return {{"path", report.path},       {"kind", report.kind},         {"usable", report.usable},
          {"state", report.state},     {"entries", report.entries},   {"per_target", report.per_target},
          {"nvrtc", report.nvrtc_build}, {"signature", report.signature}, {"hits", report.hits},
          {"bad_entries", report.bad_entries}};
}

void list(const PackArgs& args) {
  const bundle::BundleFile file(args.list, nullptr, false);
  if (!file.usable()) {
    std::fprintf(stderr, "kiln pack --list: bundle '%s' refused: %s\n", args.list.c_str(), file.error().c_str());
    set_exit_code(EXIT_FAILED);
    return;
  }
  const auto& index = file.index();
  const LayerReport report = file.report();
  if (args.json) {
    auto entries = nlohmann::json::array();
    for (const auto& record : index.records)
      entries.push_back({{"module", record.module}, {"target", record.target}, {"key", record.key.hex()},
                         {"bytes", record.size}});
    nlohmann::json out = layer_json(report);
    out["entries"] = entries;
    out["format"] = index.format_version;
    out["matches_this_nvrtc"] = index.nvrtc_build == nvrtc_build();
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("bundle %s: %zu entries, cache format %u, NVRTC %s, %s\n", args.list.c_str(), index.records.size(),
              index.format_version, index.nvrtc_build.c_str(), report.signature.c_str());
  if (index.nvrtc_build != nvrtc_build())
    std::printf("note: this process's NVRTC is %s: its entries will not match here\n",
                nvrtc_build().empty() ? "absent (bundles are then matched by the build they record)"
                                      : ("another build (" + nvrtc_build() + ")").c_str());
  std::printf("%-40s %-10s %9s  %s\n", "module", "target", "bytes", "key");
  std::vector<const bundle::IndexRecord*> sorted;
  for (const auto& record : index.records) sorted.push_back(&record);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return a->module != b->module ? a->module < b->module : a->target < b->target;
  });
  for (const auto* record : sorted)
    std::printf("%-40s %-10s %9llu  %s\n", record->module.c_str(), record->target.c_str(),
                static_cast<unsigned long long>(record->size), record->key.hex().c_str());
}

void verify(const PackArgs& args) {
  const std::optional<bundle::SigningKey> key = bundle::signing_key_from_env();
  const bundle::BundleFile file(args.verify, key ? &*key : nullptr, false);
  std::vector<std::string> problems = file.usable() ? file.verify_entries() : std::vector<std::string>{file.error()};
  // Why a failure: "signed" is a claim nobody checked; a deployment that relies on signatures must
  // not read "OK" for a bundle whose signature could be anything.
  const bool unchecked = file.usable() && file.index().signature == bundle::SignatureState::not_checked;
  if (unchecked && !args.allow_unverified)
    problems.push_back(std::string("marked signed, but not verified: no key to check the signature with (set ") +
                       fleet_key_variable + " to the fleet key, or pass --allow-unverified to accept it unchecked)");
  const bool ok = problems.empty();
  if (args.json) {
    nlohmann::json out = layer_json(file.report());
    out["ok"] = ok;
    out["signature_verified"] = file.usable() && file.index().signature == bundle::SignatureState::verified;
    out["problems"] = problems;
    std::printf("%s\n", out.dump(2).c_str());
  } else if (ok) {
    const LayerReport report = file.report();
    std::printf("bundle %s: OK, %llu entries verified (checksum, index, every entry), %s\n", args.verify.c_str(),
                static_cast<unsigned long long>(report.entries),
                unchecked ? "signed, signature not checked (no KILN_REMOTE_CACHE_KEY_FILE; --allow-unverified)"
                          : report.signature.c_str());
  } else {
    std::fprintf(stderr, "kiln pack --verify: bundle '%s' is bad:\n", args.verify.c_str());
    for (const auto& problem : problems) std::fprintf(stderr, "  %s\n", problem.c_str());
  }
  if (!ok) set_exit_code(EXIT_FAILED);
}

}  // namespace

void add_pack_command(CLI::App& app) {
  auto args = std::make_shared<PackArgs>();
  auto* cmd = app.add_subcommand("pack", "Write every module for the given targets into one bundle file; --list, --verify");
  auto* arch = cmd->add_option("--arch", args->arch, "Targets, comma-separated: sm_90a,sm_100a,... (or auto, all)");
  cmd->add_option("--variants", args->variants, "Also pack the variants this manifest lists (as kiln warm --variants)")
      ->check(existing_file("a variant manifest file"));
  auto* out = cmd->add_option("-o,--out", args->out, "The bundle file to write (replaced atomically)");
  auto* list_opt =
      cmd->add_option("--list", args->list, "Show what the bundle FILE holds")->check(existing_file("a bundle file", true));
  auto* verify_opt = cmd->add_option("--verify", args->verify,
                                     "Check the bundle FILE: header, checksum, signature, every entry; exit status 1 "
                                     "for a signed bundle without a key to check it, unless --allow-unverified")
                         ->check(existing_file("a bundle file", true));
  cmd->add_option("--jobs", args->jobs, "Compiles at once, in separate processes (default: the CPU count)")
      ->transform(integer_in(1, 256));
  auto* allow = cmd->add_flag("--allow-unverified", args->allow_unverified,
                              "With --verify: accept a signed bundle whose signature cannot be checked (no "
                              "KILN_REMOTE_CACHE_KEY_FILE) instead of exit status 1");
  cmd->add_flag("--json", args->json, "Print JSON");
  allow->needs(verify_opt);
  list_opt->excludes(verify_opt)->excludes(arch)->excludes(out);
  verify_opt->excludes(arch)->excludes(out);
  cmd->callback([args, arch, out, list_opt, verify_opt] {
    if (*list_opt) return list(*args);
    if (*verify_opt) return verify(*args);
    if (!*arch || !*out) throw CLI::ValidationError("pack", "expected --arch and -o FILE (or --list FILE, --verify FILE)");
    pack(*args);
  });
}

}  // namespace kiln::cli

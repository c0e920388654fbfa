// kiln dump / kiln compile: compile embedded modules (or a .cu file) with NVRTC, without a GPU, for
// one target, the auto target or every arch NVRTC knows; dump writes what came out into a folder.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "commands.hpp"
#include "jit/compiler.hpp"
#include "jit/dump.hpp"
#include "jit/nvrtc.hpp"
#include "jit/registry.hpp"
#include "jit/variants.hpp"
#include "kiln/error.hpp"
#include "kiln/target.hpp"

extern char** environ;

namespace kiln::cli {

namespace {

struct CompileArgs {
  std::string arch = "auto";
  std::string module;
  std::string source_file;
  std::string family = "common";
  std::string out;
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  bool sass = false;
  bool json = false;
};

/// A `--source` file, kept alive for the KernelSource that views it.
struct LoadedSource {
  std::string text;
  KernelSource source;
};

/// Reads the `--source` file. A folder, a missing or unreadable file is the command line's fault
/// (exit 2), named as `--source`: an ifstream "opens" a folder and reads nothing, which used to
/// compile an empty module and exit 0.
std::unique_ptr<LoadedSource> load_source_file(const std::string& path, const std::string& family) {
  auto loaded = std::make_unique<LoadedSource>();
  loaded->text = read_whole_file(path, "--source", "a .cu file");
  loaded->source.module = std::filesystem::path(path).stem().string();
  loaded->source.family = family;
  loaded->source.text = loaded->text;
  return loaded;
}

std::vector<const KernelSource*> requested_modules(const CompileArgs& args, const LoadedSource* file) {
  if (file != nullptr) return {&file->source};
  if (args.module.empty()) {
    std::vector<const KernelSource*> all;
    for (const auto& source : embedded_modules()) all.push_back(&source);
    return all;
  }
  if (const auto* source = find_module(args.module)) return {source};
  // `family name=value ...`, the spelling `pick --variant` and manifests take.
  const std::string first = args.module.substr(0, args.module.find_first_of(" \t"));
  if (find_variant_family(first) != nullptr) return {&variant_source(variant_from_option("--module", args.module))};
  std::string names;
  for (const auto& source : embedded_modules()) names += (names.empty() ? "" : ", ") + source.module;
  throw CLI::ValidationError("--module", "expected an embedded module (" + names +
                                           ") or a variant's name (kiln list --variants), got '" + args.module + "'");
}

struct Job {
  const KernelSource* source = nullptr;
  Target target;
  std::optional<CompiledModule> module;
  std::string error;
  bool written = false;  ///< every file of the module is in `--out`
};

/// Compile every job on `threads` workers; NVRTC compiles independent programs in parallel.
void run_jobs(std::vector<Job>& jobs, unsigned threads, const Compiler& compiler) {
  parallel_for(jobs.size(), threads, [&](std::size_t i) {
    try {
      jobs[i].module = compiler.compile(*jobs[i].source, jobs[i].target);
    } catch (const std::exception& e) {
      jobs[i].error = e.what();
    }
  });
}

std::optional<std::string> find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

/// `cuobjdump -sass <stem>.cubin > <stem>.sass`, through a temporary file and a rename.
void write_sass(const std::string& cuobjdump, const std::string& dir, const std::string& stem) {
  const std::string cubin = dir + "/" + stem + ".cubin";
  const std::string sass = dir + "/" + stem + ".sass";
  const std::string temp = dir + "/." + stem + ".sass.tmp." + std::to_string(::getpid());
  posix_spawn_file_actions_t actions;
  if (const int failed = posix_spawn_file_actions_init(&actions); failed != 0)
    throw_error("--sass: posix_spawn_file_actions_init failed: " + std::string(std::strerror(failed)));
  std::vector<std::string> words{cuobjdump, "-sass", cubin};
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (spawned == 0) spawned = posix_spawn(&pid, cuobjdump.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw_error("--sass: cannot run '" + cuobjdump + "': " + std::strerror(spawned));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw_error("--sass: waitpid failed: " + std::string(std::strerror(errno)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ::unlink(temp.c_str());
    throw_error("--sass: '" + cuobjdump + " -sass " + cubin + "' failed (status " + std::to_string(status) + ")");
  }
  if (::rename(temp.c_str(), sass.c_str()) != 0)
    throw_error("--sass: cannot rename '" + temp + "': " + std::strerror(errno));
}

void print_table(const std::vector<Job>& jobs, bool dumping) {
  std::printf("%-28s %-12s %-5s %10s %10s %11s%s\n", "module", "target", "kind", "ptx B", "cubin B", "compile ms",
              dumping ? "  files" : "");
  for (const auto& job : jobs) {
    const char* files = !dumping ? "" : job.written ? "  written" : "  NOT WRITTEN";
    if (!job.module) {
      std::printf("%-28s %-12s %-5s %10s %10s %11s%s\n", job.source->module.c_str(), job.target.name().c_str(),
                  std::string(to_string(job.target.kind)).c_str(), "-", "-", "FAILED", files);
      continue;
    }
    std::printf("%-28s %-12s %-5s %10zu %10zu %11.1f%s\n", job.source->module.c_str(), job.target.name().c_str(),
                std::string(to_string(job.target.kind)).c_str(), job.module->ptx.size(), job.module->cubin.size(),
                job.module->compile_ms, files);
  }
}

nlohmann::json to_json(const std::vector<Job>& jobs, std::size_t skipped, double wall_ms, const std::string& out) {
  auto rows = nlohmann::json::array();
  for (const auto& job : jobs) {
    nlohmann::json row{{"module", job.source->module}, {"target", job.target.name()},
                       {"kind", std::string(to_string(job.target.kind))}};
    if (job.module) {
      row["ptx_bytes"] = job.module->ptx.size();
      row["cubin_bytes"] = job.module->cubin.size();
      row["compile_ms"] = job.module->compile_ms;
      row["options"] = job.module->options;
    }
    if (!job.error.empty()) row["error"] = job.error;
    if (!out.empty()) row["written"] = job.written;
    rows.push_back(row);
  }
  nlohmann::json result{{"compiles", rows}, {"skipped", skipped}, {"wall_ms", wall_ms}};
  if (!out.empty()) {
    std::size_t written = 0;
    for (const auto& job : jobs) written += job.written ? 1 : 0;
    result["out"] = out;
    result["written"] = written;
  }
  return result;
}

void run(const CompileArgs& args) {
  const auto file = args.source_file.empty() ? nullptr : load_source_file(args.source_file, args.family);
  const auto modules = requested_modules(args, file.get());
  const auto targets = requested_targets(args.arch);
  // Why before compiling: without cuobjdump --sass cannot do its job, and every compile is wasted.
  const auto cuobjdump = args.sass ? find_on_path("cuobjdump") : std::nullopt;
  if (args.sass && !cuobjdump)
    throw CLI::ValidationError("--sass", "needs cuobjdump, which is not on the PATH (the CUDA toolkit's bin folder "
                                         "has it); nothing compiled");

  std::vector<Job> jobs;
  std::size_t skipped = 0;
  for (const auto* source : modules)
    for (const auto& target : targets) {
      if (target.carries(source->family))
        jobs.push_back(Job{source, target, std::nullopt, {}});
      else
        ++skipped;
    }
  if (jobs.empty())
    throw_error("nothing to compile: no requested module's family is carried by " +
                (targets.size() == 1 ? targets[0].name() : "the requested targets") +
                " (hopper modules build only for sm_90/sm_90a)");

  if (!args.out.empty()) {
    // Why before compiling: an --out that cannot be a folder (a file, under a regular file, no
    // space, no permission) would otherwise cost every compile and end in one write error per module.
    // A path that can never be a folder is the command line's fault (exit 2); the rest is a failure.
    const auto refuse = [&](const std::string& why) {
      throw CLI::ValidationError("--out", "cannot use '" + args.out + "' as the folder to write into: " + why +
                                              " (expected a folder, or a path where one can be created); nothing written");
    };
    struct stat info {};
    if (::stat(args.out.c_str(), &info) == 0 && !S_ISDIR(info.st_mode)) refuse("it exists and is not a folder");
    std::error_code error;
    std::filesystem::create_directories(args.out, error);
    if (error == std::errc::not_a_directory || error == std::errc::file_exists)
      refuse("a part of the path is not a folder (" + error.message() + ")");
    if (error || !std::filesystem::is_directory(args.out, error))
      throw_error("--out: cannot create the folder '" + args.out + "': " +
                  (error ? error.message() : std::string("not a folder")) + "; nothing written");
  }

  const Compiler compiler;
  const auto start = std::chrono::steady_clock::now();
  run_jobs(jobs, args.jobs, compiler);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::size_t compile_failed = 0;
  std::size_t write_failed = 0;
  for (auto& job : jobs) {
    if (!job.module) ++compile_failed;
    if (job.module && !args.out.empty()) {
      try {
        dump_module(*job.module, *job.source, args.out);
        if (cuobjdump && !job.module->cubin.empty())
          write_sass(*cuobjdump, args.out, job.module->module + "." + job.target.name());
        job.written = true;
      } catch (const std::exception& e) {
        job.error = e.what();
        ++write_failed;
      }
    }
    if (!job.error.empty()) std::fprintf(stderr, "kiln: %s\n", job.error.c_str());
  }
  const std::size_t written = jobs.size() - compile_failed - write_failed;

  if (args.json) {
    std::printf("%s\n", to_json(jobs, skipped, wall_ms, args.out).dump(2).c_str());
  } else {
    print_table(jobs, !args.out.empty());
    std::string files;
    if (!args.out.empty())
      files = written == 0 ? "; nothing written to " + args.out
                           : "; " + std::to_string(written) + " of " + std::to_string(jobs.size()) + " written to " + args.out;
    std::printf("%zu compiled, %zu failed, %zu skipped (family not carried by the target); %zu parallel, wall %.1f ms%s\n",
                jobs.size() - compile_failed, compile_failed, skipped, std::min<std::size_t>(args.jobs, jobs.size()),
                wall_ms, files.c_str());
  }
  if (compile_failed != 0 || write_failed != 0) set_exit_code(EXIT_FAILED);
}

void add_common_options(CLI::App* cmd, const std::shared_ptr<CompileArgs>& args) {
  cmd->add_option("--arch", args->arch,
                  "Target: sm_90a, compute_120, ...; auto (KILN_ARCH, else sm_90a); all (every arch NVRTC knows)");
  cmd->add_option("--module", args->module,
                  "One embedded module or variant: a name from `kiln list --variants`, or 'family name=value ...' "
                  "(default: every embedded module)");
  auto* source = cmd->add_option("--source", args->source_file, "Compile this .cu file instead of the embedded modules");
  cmd->add_option("--family", args->family, "Family of the --source file: common or hopper")
      ->check(one_of({"common", "hopper"}))
      ->needs(source);
  source->excludes("--module");
  cmd->add_option("--jobs", args->jobs, "Compiles in parallel (default: the CPU count)")->transform(integer_in(1, 256));
  cmd->add_flag("--json", args->json, "Print JSON");
}

}  // namespace

void add_dump_command(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand("dump", "Compile modules without a GPU and write .cu/.options/.ptx/.cubin/.log files");
  add_common_options(cmd, args);
  cmd->add_option("--out", args->out, "Folder to write into (created if missing)")->required();
  cmd->add_flag("--sass", args->sass, "Also write <module>.<target>.sass (needs cuobjdump on the PATH)");
  cmd->callback([args] { run(*args); });
}

void add_compile_command(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand("compile", "Compile modules without a GPU; exit 1 with NVRTC's errors if one fails");
  add_common_options(cmd, args);
  cmd->callback([args] { run(*args); });
}

}  // namespace kiln::cli

#include "cli_workers.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "base/log.hpp"
#include "cache/cache_path.hpp"
#include "cache/disk/disk_cache.hpp"
#include "runtime/module_provider.hpp"
#include "cache/remote/remote_cache.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "jit/compiler.hpp"
#include "jit/dump.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"

extern char** environ;

namespace kiln::cli {

namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;       // read end of its stdout
  std::string partial;
};

/// Starts `kiln worker` over `items`; nothing (and a debug line) if it cannot be started.
std::optional<Child> spawn_worker(const std::vector<std::string>& items) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::vector<std::string> args = {"kiln", "worker"};
  args.insert(args.end(), items.begin(), items.end());
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  // Why /proc/self/exe: the child must be this very kiln (same kernels, same key rules).
  const int spawned = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(fds[0]);
    logger().warn("kiln worker could not be started: {}; compiling here", std::strerror(spawned));
    return std::nullopt;
  }
  return Child{pid, fds[0], {}};
}

/// One report line of a worker: "<compiled|cached|failed> <module> <target> <compile ms>", at the
/// end "counters" and its disk cache's counters in for_each_counter's order, or at any time "log"
/// and one of its log messages (log_to_parent).
void report_line(const std::string& line, Progress& progress, WorkerTotals& totals) {
  if (line.rfind("log ", 0) == 0) {
    log_from_child(std::string_view(line).substr(4));
    return;
  }
  std::istringstream in(line);
  std::string what;
  in >> what;
  if (what == "counters") {
    for_each_counter(totals.disk, [&](const char*, std::uint64_t& total) {
      std::uint64_t value = 0;
      in >> value;
      total += value;
    });
    return;
  }
  std::string module, target;
  double compile_ms = 0;
  if (!(in >> module >> target >> compile_ms)) return;
  if (what == "compiled") totals.compile_ms += compile_ms;
  progress.start(module, target);
  progress.finish(what == "cached", what == "failed");
}

}  // namespace

unsigned default_jobs() { return std::max(1u, std::thread::hardware_concurrency()); }

bool compile_in_processes(const std::vector<WorkItem>& work, unsigned jobs, Progress& progress, WorkerTotals& totals) {
  if (jobs < 2 || work.size() < 2 || !jit_enabled() || nvrtc_build().empty()) return false;
  if (process_disk_cache()->status().mode != DiskCacheMode::read_write) return false;
  // Why in this process with a fleet cache: its counters (remote hits, publishes, lease waits) are
  // what `warm --json` reports for the fleet, and the workers' protocol carries only the disk's.
  if (process_remote_cache()->enabled()) return false;
  const std::size_t count = std::min<std::size_t>(jobs, work.size());
  std::vector<std::vector<std::string>> shares(count);
  // Why round robin: the items come grouped by target, and each share should mix them.
  for (std::size_t i = 0; i < work.size(); ++i)
    shares[i % count].push_back(work[i].first->module + "@" + work[i].second.name());
  std::vector<Child> children;
  for (const auto& share : shares)
    if (auto child = spawn_worker(share)) children.push_back(std::move(*child));
  if (children.empty()) return false;

  std::vector<pollfd> open;
  for (const auto& child : children) open.push_back({child.out, POLLIN, 0});
  std::size_t live = children.size();
  char buffer[4096];
  while (live > 0) {
    if (::poll(open.data(), open.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < open.size(); ++i) {
      if (open[i].fd < 0 || open[i].revents == 0) continue;
      const ssize_t got = ::read(open[i].fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        ::close(open[i].fd);
        open[i].fd = -1;
        --live;
        continue;
      }
      std::string& partial = children[i].partial;
      partial.append(buffer, static_cast<std::size_t>(got));
      for (auto end = partial.find('\n'); end != std::string::npos; end = partial.find('\n')) {
        report_line(partial.substr(0, end), progress, totals);
        partial.erase(0, end + 1);
      }
    }
  }
  for (const auto& child : children) {
    int status = 0;
    while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      logger().warn("a kiln worker (pid {}) ended with status {}; what it did not finish is compiled here",
                    child.pid, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return true;
}

void add_disk_counters(DiskCacheCounters& into, const DiskCacheCounters& from) {
  std::vector<std::uint64_t> values;
  for_each_counter(from, [&](const char*, std::uint64_t value) { values.push_back(value); });
  std::size_t i = 0;
  for_each_counter(into, [&](const char*, std::uint64_t& total) { total += values[i++]; });
}

std::optional<CompiledModule> find_in_layers(const std::vector<std::shared_ptr<CacheLayer>>& layers,
                                             const KernelSource& source, const Target& target,
                                             const std::vector<std::string>& options) {
  const std::string& own_build = nvrtc_build();
  for (const auto& layer : layers) {
    std::optional<CompiledModule> found;
    // As make_module_provider: with an NVRTC its build decides what matches.
    if (!own_build.empty()) {
      found = layer->find(module_cache_key(source, target, options, own_build), source.module, target);
    } else if (const std::string recorded = layer->recorded_nvrtc_build(); !recorded.empty()) {
      found = layer->find(module_cache_key(source, target, options, recorded), source.module, target);
    }
    if (found) {
      dump_if_requested(*found, source);
      return found;
    }
  }
  return std::nullopt;
}

ProvidedWork provide_all(const std::vector<WorkItem>& work, const ModuleProvider& provider, const Compiler& compiler,
                         const std::vector<std::shared_ptr<CacheLayer>>& layers, unsigned jobs,
                         const std::string& label, bool show,
                         const std::function<void(std::size_t, ProvidedModule&)>& use) {
  ProvidedWork done;
  done.items.resize(work.size());
  Progress progress(label, work.size(), show);
  const auto provide_one = [&](std::size_t i, Progress& shown, const std::function<ProvidedModule()>& get) {
    ProvidedItem& item = done.items[i];
    shown.start(work[i].first->module, work[i].second.name());
    try {
      ProvidedModule provided = get();
      item.from_disk = provided.from_disk;
      use(i, provided);
    } catch (const std::exception& e) {
      item.error = e.what();
    }
    shown.finish(item.from_disk, !item.error.empty());
  };
  // Why the read-only layers first, here: a worker searches only the writable folder, so what a
  // bundle holds would otherwise be compiled again.
  std::vector<std::size_t> rest;
  std::vector<std::optional<CompiledModule>> held(work.size());
  if (!layers.empty())
    parallel_for(work.size(), jobs, [&](std::size_t i) {
      held[i] = find_in_layers(layers, *work[i].first, work[i].second, compiler.options(work[i].second));
    });
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (!held[i]) {
      rest.push_back(i);
      continue;
    }
    done.items[i].from_layer = true;
    provide_one(i, progress, [&] { return ProvidedModule{std::move(*held[i]), true}; });
  }
  std::vector<WorkItem> rest_work;
  for (const std::size_t i : rest) rest_work.push_back(work[i]);
  done.workers = compile_in_processes(rest_work, jobs, progress, done.totals);
  Progress silent(label, work.size(), false);
  Progress& collecting = done.workers ? silent : progress;
  parallel_for(rest.size(), jobs, [&](std::size_t r) {
    const std::size_t i = rest[r];
    provide_one(i, collecting, [&] { return provider.provide(*work[i].first, work[i].second); });
  });
  progress.end();
  if (done.workers) done.worker_cached = progress.cached();
  return done;
}

void add_worker_command(CLI::App& app) {
  auto items = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("worker", "")->group("");  // hidden: the child of --jobs
  cmd->add_option("items", *items, "MODULE@TARGET")->required();
  cmd->callback([items] {
    // Why: the parent prints each warning once for the process tree (a bad KILN_* setting is
    // every worker's too), and its own.
    log_to_parent(stdout);
    const Compiler compiler;
    // Why no read-only layers: the parent reads the results from the writable disk cache.
    const auto disk = process_disk_cache();
    const ModuleProvider provider = make_module_provider(disk, compiler);
    for (const auto& item : *items) {
      const auto at = item.rfind('@');
      const KernelSource* source = at == std::string::npos ? nullptr : find_module(item.substr(0, at));
      if (source == nullptr) throw CLI::ValidationError("worker", "no module in '" + item + "'");
      const Target target = parse_target(item.substr(at + 1));
      const char* what = "compiled";
      double compile_ms = 0;
      try {
        const ProvidedModule provided = provider.provide(*source, target);
        what = provided.from_disk ? "cached" : "compiled";
        compile_ms = provided.module.compile_ms;
      } catch (const std::exception& e) {
        // Why not printed here: the parent compiles it again and reports the error once.
        logger().debug("worker: {}: {}", item, e.what());
        what = "failed";
      }
      std::printf("%s %s %s %.3f\n", what, source->module.c_str(), target.name().c_str(), compile_ms);
      std::fflush(stdout);
    }
    const DiskCacheCounters counters = disk->counters();
    std::printf("counters");
    for_each_counter(counters, [](const char*, std::uint64_t value) {
      std::printf(" %llu", static_cast<unsigned long long>(value));
    });
    std::printf("\n");
  });
}

}  // namespace kiln::cli

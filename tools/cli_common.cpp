#include "cli_common.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

#include "runtime/prefetch.hpp"
#include "jit/nvrtc.hpp"
#include "jit/variants.hpp"
#include "kiln/error.hpp"

namespace kiln::cli {

std::vector<Target> requested_targets(const std::string& arch) {
  const auto archs = nvrtc_supported_archs();
  if (arch == "all") {
    if (archs.empty()) throw_error("--arch all: NVRTC reported no supported archs");
    return nvrtc_targets(archs);
  }
  if (arch == "auto") return {auto_target()};
  try {
    return {parse_supported_target(arch, archs, "--arch")};
  } catch (const Error& e) {
    // Why re-thrown: a bad --arch is the command line's fault (exit 2), unlike a bad KILN_ARCH.
    throw CLI::ValidationError(e.what());
  }
}

void parallel_for(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> next{0};
  const auto drain = [&] {
    for (std::size_t i; (i = next++) < count;) work(i);
  };
  std::vector<std::thread> workers;
  for (unsigned t = 1; t < std::min<std::size_t>(threads, count); ++t) workers.emplace_back(drain);
  drain();
  for (auto& worker : workers) worker.join();
}

nlohmann::json counters_json(const ServiceCounters& counters) {
  const ModuleCacheCounters& memory = counters.memory;
  const DiskCacheCounters& disk = counters.disk;
  return {{"memory_hits", memory.memory_hits},   {"disk_hits", disk.disk_hits},
          {"compiles", memory.compiles},         {"compile_ms", memory.compile_ms},
          {"corrupt_healed", disk.corrupt_healed}, {"lock_waits", disk.lock_waits + memory.lock_waits},
          {"lock_timeouts", disk.lock_timeouts}, {"evictions", disk.evictions},
          {"load_refused", memory.load_refused}, {"store_failures", disk.store_failures},
          {"failures", memory.failures},         {"remote", remote_counters_json(counters.remote)}};
}

nlohmann::json remote_counters_json(const RemoteCacheCounters& remote) {
  nlohmann::json out = nlohmann::json::object();
  for_each_counter(remote, [&](const char* name, std::uint64_t value) { out[name] = value; });
  return out;
}

CLI::Validator existing_file(const std::string& what, bool regular) {
  auto check = [what, regular](const std::string& path) -> std::string {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0)
      return "expected " + what + ", got '" + path + "' (" + std::strerror(errno) + ")";
    if (S_ISDIR(info.st_mode)) return "expected " + what + ", got '" + path + "' (a folder)";
    if (regular && !S_ISREG(info.st_mode)) return "expected " + what + ", got '" + path + "' (not a regular file)";
    return {};
  };
  return CLI::Validator(check, "FILE", "existing_file");
}

std::string read_whole_file(const std::string& path, const std::string& option, const std::string& what) {
  const auto refuse = [&](const std::string& why) {
    throw CLI::ValidationError(option, "cannot read " + what + " '" + path + "': " + why);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) refuse(std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || S_ISDIR(info.st_mode)) {
    const int error = errno;
    ::close(fd);
    refuse(S_ISDIR(info.st_mode) ? "it is a folder" : std::strerror(error));
  }
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      refuse(std::strerror(error));
    }
    if (got == 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return text;
}

std::vector<const KernelSource*> variant_manifest_sources(const std::string& path, const std::string& option) {
  const std::string text = read_whole_file(path, option, "the variant manifest");
  std::vector<const KernelSource*> sources;
  std::set<std::string> seen;
  std::size_t number = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (const auto comment = line.find('#'); comment != std::string::npos) line.resize(comment);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (const std::string repeated = repeated_parameter(line); !repeated.empty())
      throw CLI::ValidationError(option, where + repeated);
    try {
      const Variant variant = parse_variant(line);
      // Why by name: both spellings of one variant are one module, compiled and counted once.
      if (seen.insert(variant.name()).second) sources.push_back(&variant_source(variant));
    } catch (const Error& error) {
      throw CLI::ValidationError(option, where + error.what());
    }
  }
  return sources;
}

std::vector<std::pair<const KernelSource*, Target>> modules_for(const std::vector<Target>& targets,
                                                                const std::vector<const KernelSource*>& variants) {
  std::vector<std::pair<const KernelSource*, Target>> out;
  for (const Target& target : targets) {
    std::set<std::string> seen;
    for (const KernelSource* source : carried_modules(target))
      if (seen.insert(source->module).second) out.emplace_back(source, target);
    for (const KernelSource* source : variants)
      if (target.carries(source->family) && seen.insert(source->module).second) out.emplace_back(source, target);
  }
  return out;
}

std::string usage_message(const CLI::ParseError& error) {
  const std::string message = error.what();
  // CLI11: "<name>: <n> required <type> missing", <type> being the option's type name and its
  // checks' descriptions joined by ':' ("UINT:UINT in 1..256").
  const auto colon = message.find(": ");
  const auto required = message.find(" required ");
  const std::string missing = " missing";
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) == nullptr || colon == std::string::npos ||
      required == std::string::npos || required < colon || message.size() < missing.size() ||
      message.compare(message.size() - missing.size(), missing.size(), missing) != 0)
    return message;
  std::string type = message.substr(required + 10, message.size() - missing.size() - required - 10);
  if (const auto last = type.rfind(':'); last != std::string::npos) type.erase(0, last + 1);
  return message.substr(0, colon) + ": expected a value" + (type.empty() ? "" : " (" + type + ")") + ", got none";
}

}  // namespace kiln::cli

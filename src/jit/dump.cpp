#include "jit/dump.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "base/config.hpp"
#include "base/log.hpp"
#include "kiln/error.hpp"

namespace kiln {

namespace {

[[noreturn]] void throw_io(const std::string& call, const std::string& path, const std::string& why) {
  ErrorContext context;
  context.call = call;
  context.kind = ErrorKind::io;
  throw_error("dump: " + call + " '" + path + "': " + why, context);
}

[[noreturn]] void throw_io(const std::string& call, const std::string& path, int error) {
  throw_io(call, path, std::string(std::strerror(error)));
}

/// Write `bytes` to `dir/name` through a temporary file and a rename in the same folder.
void write_atomically(const std::string& dir, const std::string& name, std::string_view bytes) {
  static std::atomic<unsigned> counter{0};
  const std::string path = dir + "/" + name;
  const std::string temp = dir + "/." + name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw_io("open", temp, errno);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      throw_io("write", temp, error);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw_io("close", temp, error);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw_io("rename", path, error);
  }
}

std::string stem(const CompiledModule& module) { return module.module + "." + module.target.name(); }

std::string joined_options(const CompiledModule& module) {
  std::string text;
  for (const auto& option : module.options) text += option + "\n";
  return text;
}

}  // namespace

std::vector<std::string> dump_file_names(const CompiledModule& module) {
  const std::string base = stem(module);
  std::vector<std::string> names{base + ".cu", base + ".options", base + ".ptx"};
  if (!module.cubin.empty()) names.push_back(base + ".cubin");
  names.push_back(base + ".log");
  return names;
}

void dump_module(const CompiledModule& module, const KernelSource& source, const std::string& dir) {
  if (dir.empty()) throw_invalid_argument("dir", "a folder path", "an empty string");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw_io("create_directories", dir, error.message());
  const std::string base = stem(module);
  write_atomically(dir, base + ".cu", source.text);
  write_atomically(dir, base + ".options", joined_options(module));
  write_atomically(dir, base + ".ptx", module.ptx);
  if (!module.cubin.empty())
    write_atomically(dir, base + ".cubin",
                     {reinterpret_cast<const char*>(module.cubin.data()), module.cubin.size()});
  write_atomically(dir, base + ".log", module.log);
}

void dump_if_requested(const CompiledModule& module, const KernelSource& source) noexcept {
  try {
    const auto dir = current_config().dump_dir;
    if (!dir) return;
    dump_module(module, source, *dir);
    logger().debug("dumped {} for {} into {}", module.module, module.target.name(), *dir);
  } catch (const std::exception& e) {
    logger().warn("KILN_DUMP_DIR: could not dump {} for {} ({}); the compile itself succeeded", module.module,
                  module.target.name(), e.what());
  } catch (...) {
    logger().warn("KILN_DUMP_DIR: could not dump {} for {}", module.module, module.target.name());
  }
}

}  // namespace kiln

#include "bench_temp.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "kiln/error.hpp"

namespace kiln::bench {

TempDir::TempDir(const std::string& what) {
  std::error_code error;
  std::filesystem::path base = std::filesystem::temp_directory_path(error);
  if (error) base = "/tmp";
  std::string pattern = (base / ("kiln-bench-" + what + "-XXXXXX")).string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (::mkdtemp(name.data()) == nullptr)
    throw_error("cannot create a temporary folder '" + pattern + "': " + std::strerror(errno));
  path_ = name.data();
}

TempDir::~TempDir() {
  std::error_code ignored;  // Why: a destructor must not throw; a leftover folder in /tmp is harmless
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::subdir(const std::string& name) const {
  const std::string dir = path_ + "/" + name;
  if (::mkdir(dir.c_str(), 0700) != 0) throw_error("cannot create '" + dir + "': " + std::strerror(errno));
  return dir;
}

}  // namespace kiln::bench

#pragma once
// A private temporary folder (mode 0700, as the disk cache requires), removed with everything in
// it when the object goes.

#include <string>

namespace kiln::bench {

class TempDir {
 public:
  /// mkdtemp under $TMPDIR (else /tmp), named `kiln-bench-<what>-XXXXXX`. Throws kiln::Error.
  explicit TempDir(const std::string& what);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const noexcept { return path_; }
  /// `path()/name`, created with mode 0700. Throws kiln::Error.
  std::string subdir(const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace kiln::bench

// main() for a fuzz target built without libFuzzer: runs LLVMFuzzerTestOneInput over every file
// given, or every file in the folders given, so the committed corpora (seeds and the inputs of
// past crashes) run in the ordinary test suite with any compiler.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

void run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
  std::fflush(stdout);
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  int files = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path(argv[i]);
    if (std::filesystem::is_directory(path)) {
      for (const auto& item : std::filesystem::recursive_directory_iterator(path))
        if (item.is_regular_file()) run_file(item.path()), ++files;
    } else {
      run_file(path);
      ++files;
    }
  }
  std::printf("%d inputs, no failure\n", files);
  return files > 0 ? 0 : 1;  // an empty corpus means the test lost its inputs
}

// NVRTC loaded at run time: where it is found (a pure rule over its inputs), what a library lacking
// an entry gives, the build ID read from a file without loading it, and that asking for the build
// does not load NVRTC while compiling does.
#include <catch2/catch.hpp>

#include <fstream>

#include "cache_test_support.hpp"
#include "jit/elf_build_id.hpp"
#include "jit/nvrtc.hpp"
#include "jit/nvrtc_api.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

void touch(const std::string& path) { std::ofstream(path) << "x"; }

}  // namespace

TEST_CASE("find_nvrtc: KILN_NVRTC_LIBRARY only, else toolkit, LD_LIBRARY_PATH, the Python wheel, in that order") {
  TempDir tmp;
  for (const char* folder : {"toolkit", "ld", "wheel"}) std::filesystem::create_directory(tmp / folder);
  NvrtcSearch search;
  search.soname = "libnvrtc.so.13";
  search.toolkit_library = tmp / "toolkit/libnvrtc.so.13";
  search.library_path = {tmp / "empty", tmp / "ld"};
  search.wheel_folders = {tmp / "wheel"};
  std::string why;
  CHECK_FALSE(find_nvrtc(search, &why));
  CHECK_THAT(why, Catch::Contains("libnvrtc.so.13") && Catch::Contains("KILN_NVRTC_LIBRARY") &&
                      Catch::Contains(tmp / "wheel"));
  touch(tmp / "wheel/libnvrtc.so.13");
  CHECK(find_nvrtc(search)->source == "python wheel");
  touch(tmp / "ld/libnvrtc.so.13");
  CHECK(find_nvrtc(search)->path == tmp / "ld/libnvrtc.so.13");
  touch(tmp / "toolkit/libnvrtc.so.13");
  CHECK(find_nvrtc(search)->source == "toolkit");

  search.override_library = tmp / "nowhere/libnvrtc.so.13";  // set but missing: no NVRTC, no fallback
  CHECK_FALSE(find_nvrtc(search, &why));
  CHECK_THAT(why, Catch::Contains("KILN_NVRTC_LIBRARY=") && Catch::Contains("not a readable file"));
  search.override_library = "libnvrtc.so.13";  // a name: searched in LD_LIBRARY_PATH
  CHECK(find_nvrtc(search)->path == tmp / "ld/libnvrtc.so.13");
  CHECK(find_nvrtc(search)->source == "KILN_NVRTC_LIBRARY");
}

TEST_CASE("wheel_folders_beside: the wheel in the site-packages one folder above kiln's code, first in the search") {
  CHECK(wheel_folders_beside("/venv/lib/python3.11/site-packages/kiln/kiln") ==
        std::vector<std::string>{"/venv/lib/python3.11/site-packages/nvidia/cu13/lib",
                                 "/venv/lib/python3.11/site-packages/nvidia/cuda_nvrtc/lib"});
  CHECK(wheel_folders_beside("/site/.kiln.mesonpy.libs/libkiln.so").front() == "/site/nvidia/cu13/lib");
  CHECK(wheel_folders_beside("kiln").empty());
  CHECK(wheel_folders_beside("/kiln").empty());

  // This test program links kiln statically, so the search starts beside the program itself.
  const std::filesystem::path program = std::filesystem::canonical("/proc/self/exe");
  const NvrtcSearch search = process_nvrtc_search();
  REQUIRE_FALSE(search.wheel_folders.empty());
  CHECK(search.wheel_folders.front() == program.parent_path().parent_path() / "nvidia/cu13/lib");
}

TEST_CASE("resolve_nvrtc_api: a library lacking an entry is not loaded, and says which") {
  const NvrtcApi api = resolve_nvrtc_api([](const char* symbol) -> void* {
    return std::string(symbol) == "nvrtcGetCUBIN" ? nullptr : reinterpret_cast<void*>(&touch);
  }, "fake-nvrtc.so");
  CHECK_FALSE(api.loaded);
  CHECK_THAT(api.load_error, Catch::Contains("fake-nvrtc.so lacks nvrtcGetCUBIN"));
}

TEST_CASE("elf_file_build_id: the toolkit's NVRTC from its file; not ELF or missing is nothing, with why") {
  const auto& location = nvrtc_location();
  REQUIRE(location.has_value());
  const auto id = elf_file_build_id(location->path);
  REQUIRE(id.has_value());
  CHECK(nvrtc_build() == "build-id " + *id);
  CHECK_FALSE(nvrtc_load_attempted());  // neither the search nor the build loads NVRTC

  TempDir tmp;
  touch(tmp / "not-elf");
  std::string why;
  CHECK_FALSE(elf_file_build_id(tmp / "not-elf", &why));
  CHECK_THAT(why, Catch::Contains("not a 64-bit little-endian ELF"));
  CHECK_FALSE(elf_file_build_id(tmp / "missing", &why));
  CHECK_THAT(why, Catch::Contains("cannot open"));
  // A truncated copy of a real library: its program headers lie past the end.
  std::ifstream in(location->path, std::ios::binary);
  std::vector<char> head(100);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  std::ofstream(tmp / "cut.so", std::ios::binary).write(head.data(), static_cast<std::streamsize>(head.size()));
  CHECK_FALSE(elf_file_build_id(tmp / "cut.so", &why));

  CHECK(nvrtc_version().has_value());  // this loads NVRTC
  CHECK(nvrtc_load_attempted());
  CHECK(nvrtc_api().loaded);
  CHECK(nvrtc_api().path == location->path);
}

// CPU-only: the disk cache at scale. A hit must not slow down as the folder grows from 10 to
// 10,000 entries, and one eviction pass over 10,000 entries must stay short.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "bench_parts.hpp"
#include "bench_plan.hpp"
#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "bench_temp.hpp"
#include "cache/disk/cache_entry.hpp"
#include "cache/disk/disk_cache.hpp"
#include "jit/compiler.hpp"
#include "kiln/error.hpp"

namespace kiln::bench {

namespace {

constexpr std::size_t CUBIN_BYTES = 9 * 1024;  // with the PTX and header, an entry of about 10 KB
const std::string MODULE = "kiln_bench_entry";

/// A synthetic module: real options, PTX-like text and pseudo-random machine code of a typical size.
CompiledModule synthetic_module(const Target& target, std::uint32_t seed) {
  CompiledModule module;
  module.module = MODULE;
  module.target = target;
  module.options = compile_options(target, false);
  module.ptx = std::string(1024, '.') + std::to_string(seed);
  module.cubin.resize(CUBIN_BYTES);
  std::uint32_t state = seed * 2654435761u + 1;
  for (auto& byte : module.cubin) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    byte = static_cast<std::uint8_t>(state);
  }
  module.compile_ms = 100;
  return module;
}

CacheKey synthetic_key(const CompiledModule& module, std::uint32_t seed) {
  CacheKeyInputs inputs;
  inputs.nvrtc_build = "build-id synthetic";
  const std::string target = module.target.name();
  inputs.target = target;
  inputs.options = module.options;
  inputs.module = module.module;
  const std::string source = "synthetic entry " + std::to_string(seed);
  inputs.source = source;
  return make_cache_key(inputs);
}

struct Folder {
  std::string dir;
  std::uint64_t bytes = 0;
  CacheKey probe;  ///< the key whose hit is timed
};

/// Writes `count` entries as the cache names and encodes them. Why not DiskCache::store: each
/// store fsyncs and runs an eviction pass over the folder, which makes filling 10,000 entries
/// quadratic; the files are the same, and the fill is set-up, not what is measured.
Folder fill(const std::string& dir, int count, const Target& target) {
  Folder folder{dir, 0, {}};
  for (int i = 0; i < count; ++i) {
    const auto seed = static_cast<std::uint32_t>(i);
    const CompiledModule module = synthetic_module(target, seed);
    const CacheKey key = synthetic_key(module, seed);
    const auto bytes = encode_entry(key, module, "13.0", static_cast<std::int64_t>(std::time(nullptr)));
    const std::string path = dir + "/" + DiskCache::entry_name(key, module.module, target);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) throw_error("cannot create '" + path + "': " + std::strerror(errno));
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    const int write_errno = errno;
    if (::close(fd) != 0 || written != static_cast<ssize_t>(bytes.size()))
      throw_error("cannot write '" + path + "': " + std::strerror(written < 0 ? write_errno : EIO));
    folder.bytes += bytes.size();
    if (i == count / 2) folder.probe = key;
  }
  return folder;
}

DiskCacheConfig config(const std::string& dir, std::uint64_t max_bytes) {
  DiskCacheConfig out;
  out.dir = dir;
  out.max_bytes = max_bytes;
  out.nvrtc = Version{13, 0};
  return out;
}

/// Median µs of one load() hit, the entry verified (checksum and all) each time.
double hit_us(const Folder& folder, const Target& target, int loads) {
  DiskCache cache(config(folder.dir, std::uint64_t{1} << 40));
  if (cache.status().mode != DiskCacheMode::read_write)
    throw_error("the benchmark's disk cache in '" + folder.dir + "' is not usable: " + cache.status().reason);
  std::vector<double> times;
  for (int i = 0; i <= loads; ++i) {
    const std::int64_t start = now_ns();
    const auto found = cache.load(folder.probe, MODULE, target);
    const std::int64_t stop = now_ns();
    if (!found) throw_error("a synthetic entry in '" + folder.dir + "' did not load as a hit");
    if (i > 0) times.push_back(static_cast<double>(stop - start) / 1e3);  // the first read warms the page cache
  }
  return median(times);
}

struct Eviction {
  double ms = 0;
  std::uint64_t evicted = 0;
};

/// One enforce_bound() pass with the bound at 90% of the folder, so about a tenth must go.
Eviction evict_tenth(const Folder& folder) {
  DiskCache cache(config(folder.dir, folder.bytes / 10 * 9));
  const std::int64_t start = now_ns();
  const std::uint64_t evicted = cache.enforce_bound();
  return {ms_between(start, now_ns()), evicted};
}

}  // namespace

void run_disk(const BenchPlan& plan, Report& report) {
  const Target target = parse_target("sm_90a");
  const TempDir temp("disk");
  const Folder small = fill(temp.subdir("small"), plan.disk_entries_small, target);
  const Folder large = fill(temp.subdir("large"), plan.disk_entries_large, target);
  const double small_hit = hit_us(small, target, plan.disk_loads);
  const double large_hit = hit_us(large, target, plan.disk_loads);
  const Eviction small_pass = evict_tenth(small);
  const Eviction large_pass = evict_tenth(large);

  Table table;
  table.id = "disk_cache";
  table.title =
      "disk cache (CPU only): one hit (open to verified binary, ~10 KB entry) and one eviction pass to 90% of the "
      "folder";
  table.columns = {"entries", "folder MB", "hit us (median)", "eviction pass ms", "evicted"};
  for (const auto* row : {&small, &large}) {
    const bool is_small = row == &small;
    const int entries = is_small ? plan.disk_entries_small : plan.disk_entries_large;
    const double hit = is_small ? small_hit : large_hit;
    const Eviction& pass = is_small ? small_pass : large_pass;
    table.add({std::to_string(entries), fixed(static_cast<double>(row->bytes) / 1e6, 1), fixed(hit, 1),
               fixed(pass.ms, 2), std::to_string(pass.evicted)},
              {{"entries", entries},
               {"bytes", row->bytes},
               {"hit_us", hit},
               {"eviction_ms", pass.ms},
               {"evicted", pass.evicted},
               {"loads", plan.disk_loads}});
  }
  report.add(std::move(table));

  const double ratio = small_hit > 0 ? large_hit / small_hit : 0;
  report.add_target({"disk hit, open to verified binary (one ~10 KB module)",
                     fixed(large_hit, 1) + " us",
                     "<= 1000 us",
                     large_hit <= 1000,
                     {{"us", large_hit}}});
  report.add_target({"disk hit with " + std::to_string(plan.disk_entries_large) + " entries vs " +
                         std::to_string(plan.disk_entries_small),
                     fixed(large_hit, 1) + " vs " + fixed(small_hit, 1) + " us (" + fixed(ratio, 2) + "x)",
                     "<= 1.25x (as fast)",
                     ratio <= 1.25,
                     {{"large_us", large_hit}, {"small_us", small_hit}}});
  report.add_target({"eviction pass over " + std::to_string(plan.disk_entries_large) + " entries (~10% evicted)",
                     fixed(large_pass.ms, 1) + " ms, " + std::to_string(large_pass.evicted) + " evicted",
                     "< 100 ms",
                     large_pass.ms < 100,
                     {{"ms", large_pass.ms}, {"evicted", large_pass.evicted}}});
}

}  // namespace kiln::bench

// for_each_counter: every field of each counters struct once, under the name the reports use,
// and writable through the non-const overloads (the worker protocol reads into them).
#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kiln/counters.hpp"

using namespace kiln;

namespace {

// Numbers every counter 1, 2, ... in visiting order, then returns the names in that order.
template <class Counters>
std::vector<std::string> number_counters(Counters& counters) {
  std::vector<std::string> names;
  for_each_counter(counters, [&](const char* name, auto& value) {
    names.emplace_back(name);
    value = static_cast<std::remove_reference_t<decltype(value)>>(names.size());
  });
  return names;
}

template <class Counters>
std::vector<double> values_of(const Counters& counters) {
  std::vector<double> values;
  for_each_counter(counters, [&](const char*, auto value) { values.push_back(static_cast<double>(value)); });
  return values;
}

template <class Counters>
void check_visits_each_field_once(std::size_t fields) {
  Counters counters;
  const std::vector<std::string> names = number_counters(counters);
  CHECK(names.size() == fields);
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  std::vector<double> expected;
  for (std::size_t i = 1; i <= fields; ++i) expected.push_back(static_cast<double>(i));
  CHECK(values_of(counters) == expected);
}

}  // namespace

TEST_CASE("for_each_counter visits every field once, writable, in declaration order") {
  check_visits_each_field_once<ModuleCacheCounters>(7);
  check_visits_each_field_once<DiskCacheCounters>(10);
  check_visits_each_field_once<RemoteCacheCounters>(15);

  ModuleCacheCounters memory;
  number_counters(memory);
  CHECK(memory.memory_hits == 1);
  CHECK(memory.compile_ms == 5.0);
  CHECK(memory.failures == 7);
  DiskCacheCounters disk;
  number_counters(disk);
  CHECK(disk.disk_hits == 1);
  CHECK(disk.lock_failures == 8);
  CHECK(disk.store_failures == 10);
  RemoteCacheCounters remote;
  number_counters(remote);
  CHECK(remote.remote_hits == 1);
  CHECK(remote.signature_mismatch == 9);
  CHECK(remote.wrong_type == 11);
  CHECK(remote.oom == 14);
  CHECK(remote.skipped == 15);
}

TEST_CASE("for_each_counter names the remote counters as kiln info --json does") {
  RemoteCacheCounters remote;
  CHECK(number_counters(remote) ==
        std::vector<std::string>{"hits", "misses", "compiles", "publishes", "publish_lost", "lease_waits",
                                 "lease_takeovers", "wait_timeouts", "signature_mismatch", "corrupt", "wrong_type",
                                 "timeouts", "errors", "oom", "skipped"});
}

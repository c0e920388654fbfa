// HandleTable::add running out of memory part way: the table is left as it was, so it keeps no
// share of the module (which would otherwise stay loaded until the table died). This program's own
// operator new fails the n-th allocation on request, for every n that add reaches.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>

#include "runtime/handle_table.hpp"
#include "runtime/module_loader.hpp"
#include "driver/primary_context.hpp"
#include "fake_driver.hpp"

namespace {

/// 0: every allocation succeeds; n > 0: the n-th allocation from now throws std::bad_alloc.
std::atomic<long> failing_allocation{0};

}  // namespace

void* operator new(std::size_t size) {
  if (failing_allocation.load() > 0 && failing_allocation.fetch_sub(1) == 1) throw std::bad_alloc();
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
// Why the nothrow and delete forms too: every allocation made through the replacement must be
// freed by its partner, or a sanitizer build reports a mismatch.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete(void* memory, const std::nothrow_t&) noexcept { std::free(memory); }

using namespace kiln;
using namespace kiln::test;

TEST_CASE("add that runs out of memory part way leaves the table as it was, holding no share of the module") {
  FakeDriver& fake = FakeDriver::instance();
  fake.reset();
  const driver::DriverApi api = fake.api();
  const driver::PrimaryContext context(api, 0);
  FakeProvider files;
  const Target target{{9, 0}, true, OutputKind::cubin};
  driver::ModuleLoader loader(context, target, files.provider());
  // Why long names: each copy into a record is then an allocation of its own (no small-string
  // buffer), so failures land between records as well as inside them.
  KernelSource source;
  source.module = "module_" + std::string(40, 'm');
  source.family = "common";
  source.entries = {"first_" + std::string(40, 'a'), "second_" + std::string(40, 'b'), "third_" + std::string(40, 'c')};
  source.text = "// fake";
  const driver::LoadResult loaded = loader.load(source);
  REQUIRE(loaded.module);
  REQUIRE(loaded.module.use_count() == 1);

  HandleTable table(0, target.name());
  int failed_adds = 0;
  std::vector<KernelHandle> handles;
  for (long nth = 1; handles.empty(); ++nth) {
    failing_allocation = nth;
    try {
      handles = table.add(loaded.module, source.entries);
      failing_allocation = 0;
    } catch (const std::bad_alloc&) {
      failing_allocation = 0;
      ++failed_adds;
      CHECK(loaded.module.use_count() == 1);
    }
  }
  // The reserve, and each record's module and entry names.
  CHECK(failed_adds >= 4);
  REQUIRE(handles.size() == source.entries.size());
  for (std::size_t i = 0; i < handles.size(); ++i) {
    // Why the low bits: no record of a failed add is left, so these are the table's first records.
    CHECK((handles[i].raw & 0xffffffffu) == i + 1);
    CHECK(table.resolve(handles[i]).entry == source.entries[i]);
  }
  table.retire(handles);
  CHECK(loaded.module.use_count() == 1);
}

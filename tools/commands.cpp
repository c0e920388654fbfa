#include "commands.hpp"

#include "cli_workers.hpp"

namespace kiln::cli {

namespace {
int status = 0;
}

int exit_code() { return status; }
void set_exit_code(int code) { status = code; }

void add_all_commands(CLI::App& app) {
  add_list_command(app);
  add_info_command(app);
  add_pick_command(app);
  add_warm_command(app);
  add_selftest_command(app);
  add_dump_command(app);
  add_compile_command(app);
  add_cache_command(app);
  add_pack_command(app);
  add_worker_command(app);
}

}  // namespace kiln::cli

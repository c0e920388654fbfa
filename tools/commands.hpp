#pragma once
// The kiln subcommands. Each lives in its own tools/cmd_<name>.cpp and registers itself here.

#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_all_commands(CLI::App& app);

void add_list_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_pick_command(CLI::App& app);
void add_warm_command(CLI::App& app);
void add_selftest_command(CLI::App& app);
void add_dump_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_cache_command(CLI::App& app);
void add_pack_command(CLI::App& app);
/// `kiln cache push|pull` (tools/cmd_cache_remote.cpp), under `cache`.
void add_cache_remote_commands(CLI::App& cache);
/// `kiln cache stats --remote`: the remote cache's entries, bytes and leases.
void remote_stats(bool json);

/// kiln's exit statuses (`kiln --help` lists them): a usage error is anything wrong with the
/// command line itself (unknown command or option, a missing or bad value); a failure is work that
/// did not get done (a compile, a write, a check, a bad KILN_ARCH).
constexpr int EXIT_FAILED = 1;
constexpr int EXIT_USAGE = 2;

/// The process's exit status, set by a subcommand that fails without throwing (e.g. a check that
/// found bad entries).
int exit_code();
void set_exit_code(int code);

}  // namespace kiln::cli

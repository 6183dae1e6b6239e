// The `edgert` subcommands. Each add_*_command registers a CLI11 subcommand whose callback
// throws BuildError / ConfigError on failure; main() turns those into a message and exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace edgert::cli {

void add_build_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_conformance_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_keygen_command(CLI::App& app);
void add_deploy_command(CLI::App& app);
void add_boards_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_quantize_command(CLI::App& app);

// Set by a command that wants a specific exit status (e.g. conformance below its pass bar).
extern int g_exit_status;

// -v / --verbose, accepted by every command (main.cpp adds it where a command has none of its
// own): more detail on stderr where the command has any to give.
extern bool g_verbose;

}  // namespace edgert::cli

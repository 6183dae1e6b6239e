// edgert: build engines from ONNX models, run, inspect and test them.
#include <malloc.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "build_error.h"
#include "commands.h"
#include "yaml_tree.h"

int edgert::cli::g_exit_status = 0;
bool edgert::cli::g_verbose = false;

int main(int argc, char** argv) {
  // A build allocates and frees the model's weights several times over (protobuf, IR, packed
  // per kernel, the self-test's packing, the engine): glibc maps each block over 128 KiB afresh
  // and unmaps it on free, so every pass paid its page faults again (most of a warm resnet18
  // build was system time). Blocks up to 32 MiB (glibc's limit for this setting) now come from
  // the heap, and freed memory stays there for the next pass.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  CLI::App app{"edgert " EDGERT_VERSION " - build ONNX models into engines for a board and run them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "edgert " EDGERT_VERSION);
  edgert::cli::add_build_command(app);
  edgert::cli::add_run_command(app);
  edgert::cli::add_inspect_command(app);
  edgert::cli::add_conformance_command(app);
  edgert::cli::add_compare_command(app);
  edgert::cli::add_bench_command(app);
  edgert::cli::add_keygen_command(app);
  edgert::cli::add_deploy_command(app);
  edgert::cli::add_boards_command(app);
  edgert::cli::add_tune_command(app);
  edgert::cli::add_quantize_command(app);
  // -v anywhere: before the command, or after it for every command without a -v of its own
  // (build's logs its steps). CLI11 does not let a subcommand's arguments fall through to the
  // parent's flags by default, so each command gets the flag itself.
  const char* verbose_help = "More detail on stderr (where the command has any)";
  app.add_flag("-v,--verbose", edgert::cli::g_verbose, verbose_help);
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    if (!command->get_option_no_throw("--verbose") && !command->get_option_no_throw("-v"))
      command->add_flag("-v,--verbose", edgert::cli::g_verbose, verbose_help);
  // `edgert -v build ...`: a command with a -v of its own gets it set too (this runs after
  // parsing, before the command's callback).
  app.parse_complete_callback([&app] {
    if (!edgert::cli::g_verbose) return;
    for (CLI::App* command : app.get_subcommands())
      if (CLI::Option* own = command->get_option_no_throw("--verbose"); own && own->count() == 0) {
        own->add_result("true");
        own->run_callback();
      }
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const edgert::builder::BuildError& e) {
    std::fprintf(stderr, "edgert: error: %s\n", e.what());
    return 1;
  } catch (const edgert::config::ConfigError& e) {
    std::fprintf(stderr, "edgert: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "edgert: error: %s\n", e.what());
    return 1;
  }
  // What commands printed is their result: a full disk or closed pipe under stdout is a failure,
  // not a successful run with its output missing.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "edgert: error: cannot write standard output: %s\n", std::strerror(errno));
    return 1;
  }
  return edgert::cli::g_exit_status;
}

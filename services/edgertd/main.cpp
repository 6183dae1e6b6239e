// edgertd: streams camera frames through engines and publishes results, under systemd.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "config.h"
#include "daemon.h"
#include "yaml_tree.h"

namespace {

const char kUsage[] =
    "usage: edgertd [--config FILE] [--check] [--version] [--help]\n"
    "  --config FILE  the configuration (default /etc/edgert/edgertd.yaml)\n"
    "  --check        validate the configuration, socket paths, engine signatures and memory budget, then exit\n"
    "  --version      print the version\n";

}  // namespace

int main(int argc, char** argv) {
  std::string config = "/etc/edgert/edgertd.yaml";
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "-c" || arg == "--config") && i + 1 < argc) {
      config = argv[++i];
    } else if (arg == "--check") {
      check_only = true;
    } else if (arg == "--version") {
      std::printf("edgertd %s\n", EDGERT_VERSION);
      return 0;
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if (check_only) {
    try {
      auto c = edgert::daemon::load_daemon_config(config);
      edgert::daemon::check_before_start(c, true);
      std::printf("%s: ok, %zu pipeline(s)\n", config.c_str(), c.pipelines.size());
      return 0;
    } catch (const edgert::config::ConfigError& e) {
      std::fprintf(stderr, "edgertd: %s\n", e.what());
      return 78;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "edgertd: %s: %s\n", config.c_str(), e.what());
      return 78;
    }
  }
  // Peers of our sockets may vanish at any time; writes report EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  edgert::daemon::Daemon daemon(config);
  return daemon.run();
}

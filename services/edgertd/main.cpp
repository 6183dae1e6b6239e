// edgertd: streams camera frames through engines and publishes results, under systemd.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "config.h"
#include "daemon.h"
#include "yaml_tree.h"

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
    } else {
      std::fprintf(stderr, "usage: edgertd [--config FILE] [--check] [--version]\n");
      return 2;
    }
  }
  if (check_only) {
    try {
      auto c = edgert::daemon::load_daemon_config(config);
      std::printf("%s: ok, %zu pipeline(s)\n", config.c_str(), c.pipelines.size());
      return 0;
    } catch (const edgert::config::ConfigError& e) {
      std::fprintf(stderr, "edgertd: %s\n", e.what());
      return 78;
    }
  }
  // Peers of our sockets may vanish at any time; writes report EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  edgert::daemon::Daemon daemon(config);
  return daemon.run();
}

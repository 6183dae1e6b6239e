// The Prometheus endpoint: GET /metrics on a Unix socket or a loopback TCP port (config.h
// MetricsConfig), served from the daemon's sd-event loop like the control socket. Each
// connection gets one response and is closed (Connection: close), so a scraper costs nothing
// between scrapes. A client that sends nothing, half a request or more than a request's worth
// holds a descriptor and a few KiB until the idle timeout, never the loop.
#pragma once

#include <functional>
#include <string>

#include "config.h"
#include "daemon_snapshot.h"
#include "unix_socket_server.h"

namespace edgert::daemon {

class MetricsServer : public UnixSocketServer {
 public:
  // Called on the loop thread for every scrape.
  using Snapshot = std::function<DaemonSnapshot()>;
  MetricsServer(const MetricsConfig& config, Snapshot snapshot);

  // Binds the configured socket or port and starts serving; throws std::runtime_error naming
  // the address and the reason (the port in use, the path taken).
  void start(sd_event* loop);

 private:
  void on_input(Client& client) override;
  void respond(Client& client, const std::string& status, const std::string& body,
               const std::string& extra_headers = "");

  MetricsConfig config_;
  Snapshot snapshot_;
};

}  // namespace edgert::daemon

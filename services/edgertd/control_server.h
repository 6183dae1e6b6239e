// The control socket (/run/edgert/control.sock): framed JSON requests from edgertctl, answered
// on the loop thread. Only root, the daemon's user and members of group `edgert` are served;
// requests are bounded in size, connections in idle time. `watch` turns a connection into a
// stream of one pipeline's results.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "unix_socket_server.h"

namespace edgert::daemon {

// Thrown by handlers: becomes {"ok": false, "error": {"code": code, "message": what}}.
class ControlError : public std::runtime_error {
 public:
  ControlError(std::string code, const std::string& message) : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

class ControlServer : public UnixSocketServer {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request, Client& client)>;
  explicit ControlServer(const std::string& path);

  void handle(const std::string& command, Handler handler) { handlers_[command] = std::move(handler); }
  // Sends `message` to every client watching `pipeline` (see the watch command).
  void broadcast(const std::string& pipeline, const nlohmann::json& message);

 private:
  void on_input(Client& client) override;
  void reply(Client& client, const nlohmann::json& response);

  std::map<std::string, Handler> handlers_;
};

}  // namespace edgert::daemon

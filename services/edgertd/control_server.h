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

// Thrown by handlers: becomes {"ok": false, "error": {"code": code, "message": what}}, plus
// "details" when given (a refused swap puts the steps it ran there).
class ControlError : public std::runtime_error {
 public:
  ControlError(std::string code, const std::string& message, nlohmann::json details = nullptr)
      : std::runtime_error(message), code_(std::move(code)), details_(std::move(details)) {}
  const std::string& code() const { return code_; }
  const nlohmann::json& details() const { return details_; }

 private:
  std::string code_;
  nlohmann::json details_;
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

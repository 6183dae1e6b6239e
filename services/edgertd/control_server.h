// The control socket (/run/edgert/control.sock): framed JSON requests from edgertctl, answered
// on the loop thread. Only root, the daemon's user and members of group `edgert` are served;
// requests are bounded in size, connections in idle time. `watch` turns a connection into a
// stream of one pipeline's results.
#pragma once

#include <functional>
#include <exception>
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

// A request's field: `fallback` when absent, else its value; a value of another type is a
// ControlError("bad_request", "'pipeline' must be a string").
std::string string_field(const nlohmann::json& request, const char* field, const std::string& fallback = "");
int64_t integer_field(const nlohmann::json& request, const char* field, int64_t fallback);

class ControlServer : public UnixSocketServer {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request, Client& client)>;
  // Answers a request later, on the loop thread: with the result, or with what was thrown
  // (ControlError or any std::exception). Call it exactly once; a client gone by then is skipped.
  using Reply = std::function<void(std::exception_ptr error, nlohmann::json result)>;
  using AsyncHandler = std::function<void(const nlohmann::json& request, Client& client, Reply reply)>;
  // Connections silent for idle_timeout_us are closed, except watch streams.
  ControlServer(const std::string& path, uint64_t idle_timeout_us);

  void handle(const std::string& command, Handler handler) { handlers_[command] = std::move(handler); }
  // For commands that wait on slow work: the client's next requests wait for this reply, so
  // answers keep the order of the requests.
  void handle_async(const std::string& command, AsyncHandler handler) {
    async_handlers_[command] = std::move(handler);
  }
  // Sends `message` to every client watching `pipeline` (see the watch command).
  void broadcast(const std::string& pipeline, const nlohmann::json& message);

 private:
  void on_input(Client& client) override;
  std::string rejection_message() const override;
  void reply(Client& client, const nlohmann::json& response);
  void finish_async(int fd, uint64_t serial, std::exception_ptr error, nlohmann::json result);
  std::string command_list() const;

  std::map<std::string, Handler> handlers_;
  std::map<std::string, AsyncHandler> async_handlers_;
};

}  // namespace edgert::daemon

#include "control_server.h"

#include "control_protocol.h"

namespace edgert::daemon {
namespace {

// Far more than operators and deploy tools open at once; each costs a descriptor and buffers.
constexpr size_t kMaxControlClients = 64;

nlohmann::json error_response(const std::string& code, const std::string& message) {
  return nlohmann::json{{"ok", false}, {"error", {{"code", code}, {"message", message}}}};
}

// The response for a handler's outcome: its result, or what it threw.
nlohmann::json response_for(std::exception_ptr error, nlohmann::json result) {
  if (!error) return {{"ok", true}, {"result", std::move(result)}};
  try {
    std::rethrow_exception(error);
  } catch (const ControlError& e) {
    nlohmann::json response = error_response(e.code(), e.what());
    if (!e.details().is_null()) response["error"]["details"] = e.details();
    return response;
  } catch (const nlohmann::json::exception&) {
    // A field read without string_field/integer_field: the library's text names no field.
    return error_response("bad_request", "a field of the request has the wrong type");
  } catch (const std::exception& e) {
    return error_response("failed", e.what());
  } catch (...) {
    return error_response("failed", "unknown error");
  }
}

}  // namespace

std::string string_field(const nlohmann::json& request, const char* field, const std::string& fallback) {
  auto it = request.find(field);
  if (it == request.end() || it->is_null()) return fallback;
  if (!it->is_string()) throw ControlError("bad_request", std::string("'") + field + "' must be a string");
  return it->get<std::string>();
}

int64_t integer_field(const nlohmann::json& request, const char* field, int64_t fallback) {
  auto it = request.find(field);
  if (it == request.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) throw ControlError("bad_request", std::string("'") + field + "' must be an integer");
  return it->get<int64_t>();
}

ControlServer::ControlServer(const std::string& path, uint64_t idle_timeout_us)
    : UnixSocketServer(path, control::kAccessGroup, Limits{4u << 20, idle_timeout_us, SlowReader::Disconnect, kMaxControlClients}) {}

std::string ControlServer::rejection_message() const {
  return control::frame_message(
      error_response("too_many_clients", "edgertd serves at most " + std::to_string(kMaxControlClients) +
                                             " control connections at a time; try again").dump());
}

void ControlServer::reply(Client& client, const nlohmann::json& response) {
  send(client, control::frame_message(response.dump()));
}

void ControlServer::broadcast(const std::string& pipeline, const nlohmann::json& message) {
  std::string framed = control::frame_message(message.dump());
  std::vector<int> watchers;
  for (auto& [fd, client] : clients())
    if (client->tag == "watch:" + pipeline) watchers.push_back(fd);
  for (int fd : watchers) {
    auto it = clients().find(fd);
    if (it != clients().end()) send(*it->second, framed);
  }
}

std::string ControlServer::command_list() const {
  std::map<std::string, int> names;
  for (const auto& [name, h] : handlers_) names[name];
  for (const auto& [name, h] : async_handlers_) names[name];
  std::string known;
  for (const auto& [name, unused] : names) known += (known.empty() ? "" : ", ") + name;
  return known;
}

void ControlServer::finish_async(int fd, uint64_t serial, std::exception_ptr error, nlohmann::json result) {
  Client* client = find_client(fd, serial);
  if (!client) return;  // it hung up meanwhile
  client->awaiting_reply = false;
  reply(*client, response_for(error, std::move(result)));
  if ((client = find_client(fd, serial))) on_input(*client);  // requests that queued up behind
}

void ControlServer::on_input(Client& client) {
  int fd = client.fd;
  uint64_t serial = client.serial;
  while (!client.awaiting_reply) {
    std::string payload;
    control::FrameStatus status = control::take_frame(client.input, control::kMaxRequestBytes, &payload);
    if (status == control::FrameStatus::Incomplete) return;
    if (status == control::FrameStatus::TooLarge) {
      reply(client, error_response("too_large", "request exceeds " + std::to_string(control::kMaxRequestBytes) + " bytes"));
      close_client(fd);
      return;
    }
    if (!client.peer.authorized) {
      reply(client, error_response("permission_denied", "uid " + std::to_string(client.peer.uid) +
                                                            " may not control edgertd: only root and members of group '" +
                                                            control::kAccessGroup + "' may"));
      close_client(fd);
      return;
    }
    nlohmann::json request = nlohmann::json::parse(payload, nullptr, false);
    nlohmann::json response;
    if (request.is_discarded() || !request.is_object() || !request.contains("command") || !request["command"].is_string()) {
      response = error_response("bad_request", "a request is a JSON object with a string \"command\"");
    } else {
      std::string command = request["command"].get<std::string>();
      auto handler = handlers_.find(command);
      auto async_handler = async_handlers_.find(command);
      if (async_handler != async_handlers_.end()) {
        client.awaiting_reply = true;
        auto answer = [this, fd, serial](std::exception_ptr error, nlohmann::json result) {
          finish_async(fd, serial, error, std::move(result));
        };
        try {
          async_handler->second(request, client, answer);
        } catch (...) {
          answer(std::current_exception(), nullptr);
        }
        return;  // finish_async resumes this client's input
      }
      if (handler == handlers_.end()) {
        response = error_response("unknown_command", "unknown command '" + command + "' (commands: " + command_list() + ")");
      } else {
        nlohmann::json result;
        std::exception_ptr error;
        try {
          result = handler->second(request, client);
        } catch (...) {
          error = std::current_exception();
        }
        response = response_for(error, std::move(result));
      }
    }
    if (!find_client(fd, serial)) return;
    reply(client, response);
    if (!find_client(fd, serial)) return;
  }
}

}  // namespace edgert::daemon

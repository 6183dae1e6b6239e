#include "control_server.h"

#include "control_protocol.h"

namespace edgert::daemon {

ControlServer::ControlServer(const std::string& path)
    : UnixSocketServer(path, control::kAccessGroup, Limits{4u << 20, 30'000'000}) {}

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

void ControlServer::on_input(Client& client) {
  int fd = client.fd;
  for (;;) {
    std::string payload;
    control::FrameStatus status = control::take_frame(client.input, control::kMaxRequestBytes, &payload);
    if (status == control::FrameStatus::Incomplete) return;
    auto error = [&](const std::string& code, const std::string& message) {
      return nlohmann::json{{"ok", false}, {"error", {{"code", code}, {"message", message}}}};
    };
    if (status == control::FrameStatus::TooLarge) {
      reply(client, error("too_large", "request exceeds " + std::to_string(control::kMaxRequestBytes) + " bytes"));
      close_client(fd);
      return;
    }
    if (!client.peer.authorized) {
      reply(client, error("permission_denied", "uid " + std::to_string(client.peer.uid) +
                                                  " may not control edgertd: only root and members of group '" +
                                                  control::kAccessGroup + "' may"));
      close_client(fd);
      return;
    }
    nlohmann::json request = nlohmann::json::parse(payload, nullptr, false);
    nlohmann::json response;
    if (request.is_discarded() || !request.is_object() || !request.contains("command") || !request["command"].is_string()) {
      response = error("bad_request", "a request is a JSON object with a string \"command\"");
    } else {
      auto handler = handlers_.find(request["command"].get<std::string>());
      if (handler == handlers_.end()) {
        std::string known;
        for (const auto& [name, h] : handlers_) known += (known.empty() ? "" : ", ") + name;
        response = error("unknown_command", "unknown command '" + request["command"].get<std::string>() +
                                                "' (commands: " + known + ")");
      } else {
        try {
          response = {{"ok", true}, {"result", handler->second(request, client)}};
        } catch (const ControlError& e) {
          response = error(e.code(), e.what());
          if (!e.details().is_null()) response["error"]["details"] = e.details();
        } catch (const std::exception& e) {
          response = error("failed", e.what());
        }
      }
    }
    if (clients().find(fd) == clients().end()) return;
    reply(client, response);
    if (clients().find(fd) == clients().end()) return;
  }
}

}  // namespace edgert::daemon

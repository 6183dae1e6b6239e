// Sinks that stream each result as it happens: newline-delimited JSON to any client of a Unix
// socket, and the systemd journal (one result in N, at info priority).
#pragma once

#include <memory>
#include <string>

#include "result.h"
#include "unix_socket_server.h"

namespace edgert::daemon {

// The JSON of one result, as the socket sink and `edgertctl watch` print it.
nlohmann::json result_to_json(const Result& result);

class SocketSink : public Sink {
 public:
  SocketSink(const std::string& path, sd_event* loop);
  void publish(const Result& result) override;
  std::string describe() const override { return "socket " + server_.path(); }

 private:
  class Server : public UnixSocketServer {
   public:
    explicit Server(const std::string& path) : UnixSocketServer(path, "edgert", Limits{}) {}
    void on_input(Client& client) override { client.input.clear(); }  // clients only listen
  };
  Server server_;
};

class JournalSink : public Sink {
 public:
  explicit JournalSink(int every_n) : every_n_(every_n) {}
  void publish(const Result& result) override;
  std::string describe() const override { return "journal"; }

 private:
  int every_n_;
  uint64_t count_ = 0;
};

}  // namespace edgert::daemon

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

// Each client gets every result while it keeps up. A client that reads slower than results come
// (or not at all) has at most `buffer_bytes` of them pending: beyond that its oldest unsent
// results are dropped and counted, never the connection. Results are independent messages and
// a reader wants the latest, so dropping old ones serves it better than a disconnect it must
// notice and repair; the bound (times max_clients) is what memory readers can make us spend.
class SocketSink : public Sink {
 public:
  SocketSink(const std::string& path, size_t buffer_bytes, sd_event* loop);
  void publish(const Result& result) override;
  std::string describe() const override { return "socket " + server_.path(); }
  SinkCounters counters() const override;

 private:
  class Server : public UnixSocketServer {
   public:
    Server(const std::string& path, size_t buffer_bytes)
        : UnixSocketServer(path, "edgert", Limits{buffer_bytes, 0, SlowReader::DropOldest, 64}) {}
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

// A Unix stream socket served from the sd-event loop: accepts clients, checks their
// credentials (SO_PEERCRED), buffers writes without blocking the loop, and bounds what a client
// can make the daemon spend (pending output, idle time). ControlServer and the result stream
// sink build on it.
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace edgert::daemon {

struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  bool authorized = false;  // root, the daemon's own user, or a member of the access group
};

// True when `peer` may use the daemon: uid 0, the daemon's uid, or membership (primary or
// supplementary, read from /proc/PID/status) of group `group`.
bool peer_in_group(const Peer& peer, const std::string& group);

class UnixSocketServer {
 public:
  struct Client {
    int fd = -1;
    Peer peer;
    std::string input, output;
    sd_event_source* io = nullptr;
    sd_event_source* idle = nullptr;
    std::string tag;  // what the owner uses the client for (e.g. the pipeline it watches)
    uint64_t serial = 0;  // unique per connection: tells a reused fd from the client that had it
    bool awaiting_reply = false;  // a request is being answered later; further input waits
  };
  struct Limits {
    size_t max_pending_output = 4u << 20;  // a client that reads slower than this is dropped
    uint64_t idle_timeout_us = 0;          // 0: no idle timeout
  };

  UnixSocketServer(std::string path, std::string group, Limits limits);
  virtual ~UnixSocketServer();

  // Creates the socket (parent directory too, stale socket removed, mode 0660, group `group`
  // when it exists) and starts accepting. Throws std::runtime_error naming the path.
  void start(sd_event* loop);
  void stop();
  const std::string& path() const { return path_; }

  void send(Client& client, const std::string& bytes);
  void close_client(int fd);
  std::map<int, std::unique_ptr<Client>>& clients() { return clients_; }
  // The client with this fd, if it is still the connection `serial` names; else null.
  Client* find_client(int fd, uint64_t serial);

 protected:
  // Called with new input; the owner consumes what it can from client.input.
  virtual void on_input(Client& client) = 0;
  virtual void on_connect(Client&) {}

 private:
  static int on_accept(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  static int on_client_io(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  static int on_idle(sd_event_source* s, uint64_t usec, void* userdata);
  void flush(Client& client);
  void touch(Client& client);

  std::string path_, group_;
  Limits limits_;
  sd_event* loop_ = nullptr;
  int listen_fd_ = -1;
  sd_event_source* accept_source_ = nullptr;
  std::map<int, std::unique_ptr<Client>> clients_;
  uint64_t next_serial_ = 1;
};

}  // namespace edgert::daemon

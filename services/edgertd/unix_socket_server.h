// A Unix stream socket served from the sd-event loop: accepts clients, checks their
// credentials (SO_PEERCRED), buffers writes without blocking the loop, and bounds what a client
// can make the daemon spend (pending output, idle time). ControlServer, the result stream sink
// and the metrics endpoint (which may listen on a loopback TCP port instead) build on it.
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <deque>
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

// What is at a socket path before the daemon binds it: "" when nothing is there or only a
// socket (maybe stale), else why the path cannot be used ("'/x' is a regular file, not a
// socket: ..."). Only ever a socket is replaced, so a mistyped path cannot delete a file.
std::string socket_path_problem(const std::string& path);

class UnixSocketServer {
 public:
  struct Client {
    int fd = -1;
    Peer peer;
    std::string input;
    // Pending output, whole messages in order; the first may be partly sent (output_offset).
    std::deque<std::string> output;
    size_t output_offset = 0;
    size_t output_bytes = 0;      // unsent bytes of `output`
    uint64_t dropped_messages = 0;  // SlowReader::DropOldest: messages this client never got
    sd_event_source* io = nullptr;
    sd_event_source* idle = nullptr;
    bool idle_exempt = false;  // a stream the client asked for (watch): silence is expected
    std::string tag;  // what the owner uses the client for (e.g. the pipeline it watches)
    uint64_t serial = 0;  // unique per connection: tells a reused fd from the client that had it
    bool awaiting_reply = false;  // a request is being answered later; further input waits
    bool close_when_sent = false;  // see close_after_sending
  };
  // What happens when a client's pending output would pass max_pending_output.
  enum class SlowReader {
    Disconnect,  // replies must arrive whole and in order: the connection goes
    DropOldest,  // a stream of independent messages: the oldest unsent ones go (counted)
  };
  struct Limits {
    size_t max_pending_output = 4u << 20;
    uint64_t idle_timeout_us = 0;  // 0: no idle timeout
    SlowReader slow_reader = SlowReader::Disconnect;
    size_t max_clients = 64;  // connections beyond this are closed at once
  };

  UnixSocketServer(std::string path, std::string group, Limits limits);
  virtual ~UnixSocketServer();

  // Creates the socket (parent directory too, mode 0660, group `group` when it exists) and
  // starts accepting. A socket already at the path is replaced only when nobody accepts on it
  // (stale); anything else there, or a live socket, throws std::runtime_error naming the path.
  void start(sd_event* loop);
  // Serves `listening_fd`, a non-blocking socket the caller bound and listens on (the metrics
  // endpoint's loopback TCP port), and takes ownership of it. Its peers carry no credentials,
  // so none is authorized; path() only names it in messages, and stop() unlinks nothing.
  void start(sd_event* loop, int listening_fd);
  void stop();
  const std::string& path() const { return path_; }

  void send(Client& client, const std::string& bytes);
  void close_client(int fd);
  // Closes the connection once its pending output is sent (at once when there is none); input
  // that arrives meanwhile is read and discarded.
  void close_after_sending(Client& client);
  std::map<int, std::unique_ptr<Client>>& clients() { return clients_; }
  size_t client_count() const { return clients_.size(); }
  // The client with this fd, if it is still the connection `serial` names; else null.
  Client* find_client(int fd, uint64_t serial);
  // Stops the idle timeout for a client that subscribed to a stream: it only listens.
  void exempt_from_idle_timeout(Client& client);
  // Unsent bytes over all clients: memory the daemon holds for them.
  size_t buffered_bytes() const;
  // Messages dropped for slow readers since start, over all clients (those gone included).
  uint64_t dropped_messages() const { return dropped_messages_; }

 protected:
  // Called with new input; the owner consumes what it can from client.input.
  virtual void on_input(Client& client) = 0;
  virtual void on_connect(Client&) {}
  // Written (best effort) to a connection refused for max_clients before it is closed.
  virtual std::string rejection_message() const { return ""; }

 private:
  // Accepts on listen_fd_ from the loop.
  void accept_on(sd_event* loop);
  static int on_accept(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  static int on_client_io(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  static int on_idle(sd_event_source* s, uint64_t usec, void* userdata);
  static int on_accept_resume(sd_event_source* s, uint64_t usec, void* userdata);
  void flush(Client& client);
  void touch(Client& client);
  void pause_accepting(int error);

  std::string path_, group_;
  Limits limits_;
  sd_event* loop_ = nullptr;
  int listen_fd_ = -1;
  bool unlink_at_stop_ = false;  // the socket file is ours (not a caller's TCP socket)
  sd_event_source* accept_source_ = nullptr;
  std::map<int, std::unique_ptr<Client>> clients_;
  uint64_t next_serial_ = 1;
  uint64_t dropped_messages_ = 0;
  // Out of file descriptors: the listening fd stays readable while accept4 fails, so it is not
  // polled for a moment instead of spinning the loop (streaming goes on meanwhile).
  sd_event_source* accept_resume_ = nullptr;
  uint64_t accept_failures_ = 0;      // since the last report
  uint64_t accept_last_report_us_ = 0;
};

}  // namespace edgert::daemon

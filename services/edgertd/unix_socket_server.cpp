#include "unix_socket_server.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace edgert::daemon {
namespace {

void make_parent_dirs(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1))
    mkdir(path.substr(0, slash).c_str(), 0755);
}

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device node";
  return "not a socket";
}

}  // namespace

std::string socket_path_problem(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0)
    return errno == ENOENT ? "" : "cannot use socket path '" + path + "': " + strerror(errno);
  if (S_ISSOCK(st.st_mode)) return "";
  return "socket path '" + path + "' is " + file_kind(st.st_mode) +
         ", not a socket; edgertd only ever replaces a stale socket (choose another path, or move the file away)";
}

bool peer_in_group(const Peer& peer, const std::string& group) {
  if (peer.uid == 0 || peer.uid == geteuid()) return true;
  struct group* g = getgrnam(group.c_str());
  if (!g) return false;
  if (peer.gid == g->gr_gid) return true;
  std::ifstream status("/proc/" + std::to_string(peer.pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Groups:", 0) != 0) continue;
    std::istringstream ids(line.substr(7));
    for (gid_t id; ids >> id;)
      if (id == g->gr_gid) return true;
  }
  return false;
}

UnixSocketServer::UnixSocketServer(std::string path, std::string group, Limits limits)
    : path_(std::move(path)), group_(std::move(group)), limits_(limits) {}

UnixSocketServer::~UnixSocketServer() { stop(); }

void UnixSocketServer::start(sd_event* loop) {
  loop_ = loop;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof addr.sun_path) throw std::runtime_error("socket path '" + path_ + "' is too long");
  std::strcpy(addr.sun_path, path_.c_str());
  make_parent_dirs(path_);
  std::string problem = socket_path_problem(path_);
  if (!problem.empty()) throw std::runtime_error(problem);
  struct stat st {};
  if (lstat(path_.c_str(), &st) == 0) {
    // A socket is there: replace it only when nobody accepts on it (left by a crash).
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (probe < 0) throw std::runtime_error("cannot probe socket path '" + path_ + "': " + strerror(errno));
    bool live = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 || errno == EAGAIN;
    close(probe);
    if (live)
      throw std::runtime_error("socket path '" + path_ + "' is in use: another process accepts connections on it (a second edgertd, or "
                               "two users of one path?)");
    unlink(path_.c_str());
  }
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listen_fd_, 16) != 0)
    throw std::runtime_error("cannot listen on '" + path_ + "': " + strerror(errno));
  // Access is decided per peer; the mode keeps others from even connecting.
  chmod(path_.c_str(), 0660);
  if (struct group* g = getgrnam(group_.c_str())) {
    if (chown(path_.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) { /* not fatal: peers are checked anyway */ }
  }
  unlink_at_stop_ = true;
  accept_on(loop);
}

void UnixSocketServer::start(sd_event* loop, int listening_fd) {
  loop_ = loop;
  listen_fd_ = listening_fd;
  unlink_at_stop_ = false;
  accept_on(loop);
}

void UnixSocketServer::accept_on(sd_event* loop) {
  int r = sd_event_add_io(loop, &accept_source_, listen_fd_, EPOLLIN, &UnixSocketServer::on_accept, this);
  if (r < 0) throw std::runtime_error("cannot watch '" + path_ + "': " + strerror(-r));
}

void UnixSocketServer::stop() {
  while (!clients_.empty()) close_client(clients_.begin()->first);
  if (accept_resume_) accept_resume_ = sd_event_source_disable_unref(accept_resume_);
  if (accept_source_) accept_source_ = sd_event_source_disable_unref(accept_source_);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    if (unlink_at_stop_) unlink(path_.c_str());
    listen_fd_ = -1;
  }
}

int UnixSocketServer::on_accept(sd_event_source*, int fd, uint32_t, void* userdata) {
  auto* self = static_cast<UnixSocketServer*>(userdata);
  for (;;) {
    int client_fd = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client_fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) self->pause_accepting(errno);
      break;
    }
    if (self->clients_.size() >= self->limits_.max_clients) {
      std::string why = self->rejection_message();
      if (!why.empty() && ::send(client_fd, why.data(), why.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* it learns from the EOF */ }
      // Unread input at close would reset the connection, and the client lose the message.
      char discard[4096];
      while (recv(client_fd, discard, sizeof discard, MSG_DONTWAIT) > 0) {
      }
      close(client_fd);
      continue;
    }
    auto client = std::make_unique<Client>();
    client->fd = client_fd;
    client->serial = self->next_serial_++;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(client_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      client->peer.pid = cred.pid;
      client->peer.uid = cred.uid;
      client->peer.gid = cred.gid;
      client->peer.authorized = peer_in_group(client->peer, self->group_);
    }
    if (sd_event_add_io(self->loop_, &client->io, client_fd, EPOLLIN, &UnixSocketServer::on_client_io, self) < 0) {
      close(client_fd);
      continue;
    }
    Client& ref = *client;
    self->clients_[client_fd] = std::move(client);
    self->touch(ref);
    self->on_connect(ref);
  }
  return 0;
}

void UnixSocketServer::pause_accepting(int error) {
  constexpr uint64_t kPauseUs = 100'000, kReportEveryUs = 10'000'000;
  uint64_t now;
  sd_event_now(loop_, CLOCK_MONOTONIC, &now);
  ++accept_failures_;
  if (!accept_last_report_us_ || now - accept_last_report_us_ >= kReportEveryUs) {
    std::fprintf(stderr, SD_WARNING "%s: cannot accept connections: %s (%llu time(s) since the last report); "
                 "pausing accept for 100 ms at a time\n",
                 path_.c_str(), strerror(error), static_cast<unsigned long long>(accept_failures_));
    accept_last_report_us_ = now;
    accept_failures_ = 0;
  }
  sd_event_source_set_enabled(accept_source_, SD_EVENT_OFF);
  if (accept_resume_) {
    sd_event_source_set_time(accept_resume_, now + kPauseUs);
    sd_event_source_set_enabled(accept_resume_, SD_EVENT_ONESHOT);
  } else {
    sd_event_add_time(loop_, &accept_resume_, CLOCK_MONOTONIC, now + kPauseUs, 0, &UnixSocketServer::on_accept_resume, this);
  }
}

int UnixSocketServer::on_accept_resume(sd_event_source*, uint64_t, void* userdata) {
  auto* self = static_cast<UnixSocketServer*>(userdata);
  if (self->accept_source_) sd_event_source_set_enabled(self->accept_source_, SD_EVENT_ON);
  return 0;
}

void UnixSocketServer::exempt_from_idle_timeout(Client& client) {
  client.idle_exempt = true;
  if (client.idle) sd_event_source_set_enabled(client.idle, SD_EVENT_OFF);
}

size_t UnixSocketServer::buffered_bytes() const {
  size_t bytes = 0;
  for (const auto& [fd, client] : clients_) bytes += client->output_bytes + client->input.size();
  return bytes;
}

UnixSocketServer::Client* UnixSocketServer::find_client(int fd, uint64_t serial) {
  auto it = clients_.find(fd);
  return it != clients_.end() && it->second->serial == serial ? it->second.get() : nullptr;
}

void UnixSocketServer::touch(Client& client) {
  if (!limits_.idle_timeout_us || client.idle_exempt) return;
  uint64_t now;
  sd_event_now(loop_, CLOCK_MONOTONIC, &now);
  if (client.idle) {
    sd_event_source_set_time(client.idle, now + limits_.idle_timeout_us);
    sd_event_source_set_enabled(client.idle, SD_EVENT_ONESHOT);
  } else {
    sd_event_add_time(loop_, &client.idle, CLOCK_MONOTONIC, now + limits_.idle_timeout_us, 0,
                      &UnixSocketServer::on_idle, this);
    sd_event_source_set_description(client.idle, std::to_string(client.fd).c_str());
  }
}

int UnixSocketServer::on_idle(sd_event_source* s, uint64_t, void* userdata) {
  const char* description = nullptr;
  sd_event_source_get_description(s, &description);
  if (description) static_cast<UnixSocketServer*>(userdata)->close_client(std::atoi(description));
  return 0;
}

int UnixSocketServer::on_client_io(sd_event_source*, int fd, uint32_t revents, void* userdata) {
  auto* self = static_cast<UnixSocketServer*>(userdata);
  auto it = self->clients_.find(fd);
  if (it == self->clients_.end()) return 0;
  Client& client = *it->second;
  if (revents & EPOLLOUT) self->flush(client);
  if (self->clients_.find(fd) == self->clients_.end()) return 0;
  if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    char buffer[65536];
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
      self->close_client(fd);
      return 0;
    }
    if (n > 0 && client.close_when_sent) return 0;
    if (n > 0) {
      client.input.append(buffer, static_cast<size_t>(n));
      self->touch(client);
      self->on_input(client);
    }
  }
  return 0;
}

void UnixSocketServer::send(Client& client, const std::string& bytes) {
  // A consumer slower than the producer would make the daemon buffer without bound.
  if (client.output_bytes + bytes.size() > limits_.max_pending_output) {
    if (limits_.slow_reader == SlowReader::Disconnect) {
      close_client(client.fd);
      return;
    }
    // The message being sent stays: cutting it would break the stream's framing.
    auto it = client.output.begin() + (client.output_offset ? 1 : 0);
    while (client.output_bytes + bytes.size() > limits_.max_pending_output && it != client.output.end()) {
      client.output_bytes -= it->size();
      it = client.output.erase(it);
      ++client.dropped_messages;
      ++dropped_messages_;
    }
    if (client.output_bytes + bytes.size() > limits_.max_pending_output) {
      ++client.dropped_messages;
      ++dropped_messages_;
      return;
    }
  }
  client.output.push_back(bytes);
  client.output_bytes += bytes.size();
  flush(client);
}

void UnixSocketServer::flush(Client& client) {
  while (!client.output.empty()) {
    const std::string& front = client.output.front();
    // MSG_NOSIGNAL: a client that hung up is an EPIPE to handle, not a SIGPIPE that kills us.
    ssize_t n = ::send(client.fd, front.data() + client.output_offset, front.size() - client.output_offset, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN) break;
      if (errno == EINTR) continue;
      close_client(client.fd);
      return;
    }
    client.output_offset += static_cast<size_t>(n);
    client.output_bytes -= static_cast<size_t>(n);
    if (client.output_offset == front.size()) {
      client.output.pop_front();
      client.output_offset = 0;
    }
  }
  if (client.close_when_sent) {
    if (client.output.empty()) {
      // Unread input at close would reset the connection, and the peer could lose the response.
      // Bounded: a peer that keeps sending cannot hold the loop here.
      char discard[4096];
      for (int i = 0; i < 16 && recv(client.fd, discard, sizeof discard, MSG_DONTWAIT) > 0; ++i) {
      }
      close_client(client.fd);
      return;
    }
    // Only the response is left: a peer that shut down its sending side is not read again.
    sd_event_source_set_io_events(client.io, EPOLLOUT);
    return;
  }
  sd_event_source_set_io_events(client.io, client.output.empty() ? EPOLLIN : (EPOLLIN | EPOLLOUT));
}

void UnixSocketServer::close_after_sending(Client& client) {
  client.close_when_sent = true;
  flush(client);
}

void UnixSocketServer::close_client(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  Client& c = *it->second;
  if (c.io) sd_event_source_disable_unref(c.io);
  if (c.idle) sd_event_source_disable_unref(c.idle);
  close(c.fd);
  clients_.erase(it);
}

}  // namespace edgert::daemon

#include "metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "control_protocol.h"
#include "metrics_exposition.h"

namespace edgert::daemon {
namespace {

// A scrape's request is one line and a few headers; anything longer is not a scraper.
constexpr size_t kMaxRequestBytes = 8192;
// Scrapers connect, ask and read within a second; a connection silent this long is dropped.
constexpr uint64_t kIdleTimeoutUs = 10'000'000;
// Far more than the scrapers of one board; each costs a descriptor and a response's buffer.
constexpr size_t kMaxClients = 16;

// A non-blocking socket listening on the loopback address `host` (127.0.0.1, ::1, localhost).
int listen_on_loopback(const std::string& host, int port, const std::string& where) {
  const bool v6 = host == "::1";
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int error = errno;
    throw std::runtime_error("metrics: cannot create a socket for " + where + ": " + strerror(error) +
                             (error == EAFNOSUPPORT || error == EPERM || error == EACCES
                                  ? " (the shipped edgertd.service allows Unix sockets only: use metrics.socket, or "
                                    "a drop-in with RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 and PrivateNetwork=no)"
                                  : ""));
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restart must not wait out TIME_WAIT
  int r;
  if (v6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    addr.sin6_addr = in6addr_loopback;
    r = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    r = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  if (r != 0 || listen(fd, 16) != 0) {
    int error = errno;
    close(fd);
    throw std::runtime_error("metrics: cannot listen on " + where + ": " + strerror(error) +
                             (error == EADDRINUSE ? " (another process has the port: choose another metrics.listen)" : ""));
  }
  return fd;
}

}  // namespace

MetricsServer::MetricsServer(const MetricsConfig& config, Snapshot snapshot)
    : UnixSocketServer(config.socket.empty() ? config.describe() : config.socket, control::kAccessGroup,
                       Limits{4u << 20, kIdleTimeoutUs, SlowReader::Disconnect, kMaxClients}),
      config_(config),
      snapshot_(std::move(snapshot)) {}

void MetricsServer::start(sd_event* loop) {
  if (!config_.socket.empty()) {
    UnixSocketServer::start(loop);
    return;
  }
  UnixSocketServer::start(loop, listen_on_loopback(config_.listen_host, config_.listen_port, config_.describe()));
}

void MetricsServer::respond(Client& client, const std::string& status, const std::string& body,
                            const std::string& extra_headers) {
  const bool ok = status.rfind("200", 0) == 0;
  const int fd = client.fd;
  const uint64_t serial = client.serial;
  send(client, "HTTP/1.1 " + status + "\r\nContent-Type: " + (ok ? kPrometheusContentType : "text/plain; charset=utf-8") +
                   "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers +
                   "Connection: close\r\n\r\n" + body);
  if (Client* still = find_client(fd, serial)) close_after_sending(*still);  // send closes a response too large
}

void MetricsServer::on_input(Client& client) {
  size_t end = client.input.find("\r\n\r\n");
  if (end == std::string::npos) end = client.input.find("\n\n");  // bare LF, as some tools send
  if (end == std::string::npos) {
    if (client.input.size() > kMaxRequestBytes)
      respond(client, "431 Request Header Fields Too Large",
              "a metrics request is at most " + std::to_string(kMaxRequestBytes) + " bytes\n");
    return;  // the rest of the request is still coming
  }
  const std::string line = client.input.substr(0, client.input.find_first_of("\r\n"));
  const size_t first = line.find(' '), second = line.find(' ', first + 1);
  if (first == std::string::npos || second == std::string::npos || line.compare(second + 1, 5, "HTTP/") != 0) {
    respond(client, "400 Bad Request", "expected an HTTP request line: GET /metrics HTTP/1.1\n");
    return;
  }
  const std::string method = line.substr(0, first);
  std::string target = line.substr(first + 1, second - first - 1);
  target = target.substr(0, target.find('?'));  // scrapers may add parameters; there are none to honour
  if (target != "/metrics") {
    respond(client, "404 Not Found", "edgertd serves its metrics at /metrics\n");
    return;
  }
  if (method != "GET") {
    respond(client, "405 Method Not Allowed", "/metrics answers GET only\n", "Allow: GET\r\n");
    return;
  }
  respond(client, "200 OK", prometheus_exposition(snapshot_()));
}

}  // namespace edgert::daemon

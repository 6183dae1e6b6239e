// libFuzzer target: arbitrary bytes sent down edgertd's control socket. A real daemon (one
// test-pattern pipeline on the engine in $EDGERT_FUZZ_ENGINE, state in a fresh temporary
// directory) runs its event loop on a thread of this process; each input is one connection that
// writes the bytes as they are (so the 4-byte length framing is fuzzed along with the JSON and
// the commands' arguments), closes its write side and reads what comes back. The daemon must
// answer or close, never crash, hang, leak or stop serving: a connection it no longer accepts
// is a failure. State carries over from input to input, as on a board.
#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "daemon.h"

namespace {

std::string g_socket;

std::string make_config(const std::string& dir, const char* engine) {
  const std::string path = dir + "/edgertd.yaml";
  std::ofstream(path) << "board: native\n"
                         "control_socket: " << dir << "/control.sock\n"
                         "state_dir: " << dir << "/state\n"
                         "pipelines:\n"
                         "  - name: main\n"
                         "    source: {type: test-pattern, width: 64, height: 48, fps: 30, format: yuyv}\n"
                         "    engine: " << engine << "\n"
                         "    postprocess: {type: classification, top_k: 1}\n"
                         "    sinks:\n"
                         "      socket: {path: " << dir << "/results.sock}\n";
  return path;
}

int connect_control() {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", g_socket.c_str());
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* engine = std::getenv("EDGERT_FUZZ_ENGINE");
  if (!engine) {
    std::fprintf(stderr, "control_protocol_fuzz: set EDGERT_FUZZ_ENGINE to an engine for the test pattern\n");
    std::exit(2);
  }
  char dir_template[] = "/tmp/edgertd-fuzz-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  g_socket = dir + "/control.sock";
  const std::string config = make_config(dir, engine);
  signal(SIGPIPE, SIG_IGN);
  std::thread([config] {
    edgert::daemon::Daemon daemon(config);
    std::fprintf(stderr, "control_protocol_fuzz: the daemon stopped (exit %d)\n", daemon.run());
    std::abort();
  }).detach();
  for (int i = 0; i < 300; ++i) {  // up to 30 s for the daemon to load its engine and listen
    int fd = connect_control();
    if (fd >= 0) {
      close(fd);
      return 0;
    }
    usleep(100 * 1000);
  }
  std::fprintf(stderr, "control_protocol_fuzz: the daemon never listened on %s\n", g_socket.c_str());
  std::exit(2);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = connect_control();
  if (fd < 0) {
    std::fprintf(stderr, "control_protocol_fuzz: the daemon stopped accepting connections: %s\n", strerror(errno));
    std::abort();
  }
  for (size_t done = 0; done < size;) {
    ssize_t n = send(fd, data + done, size - done, MSG_NOSIGNAL);
    if (n <= 0) break;  // the daemon may close a connection that sent too much or nonsense
    done += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  // Read until the daemon closes, for at most 2 s: a request cut short waits for more bytes
  // until the idle timeout, and a watch streams results, neither of which this waits out.
  char buffer[4096];
  for (int waited_ms = 0; waited_ms < 2000; waited_ms += 100) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0 && read(fd, buffer, sizeof buffer) <= 0) break;
  }
  close(fd);
  return 0;
}

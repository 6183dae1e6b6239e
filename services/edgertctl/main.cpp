// edgertctl: talks to edgertd over its control socket (framed JSON, see control_protocol.h).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "control_protocol.h"

namespace {

using nlohmann::json;

int usage() {
  std::fprintf(stderr,
               "usage: edgertctl [--socket PATH] [--json] COMMAND [ARGS]\n"
               "commands:\n"
               "  status             daemon, memory budget and pipelines with statistics\n"
               "  pipelines          the pipelines and their engines\n"
               "  stats [PIPELINE]   fps, drops, p50/p99 latency per stage\n"
               "  watch PIPELINE     stream results as JSON lines until interrupted\n"
               "  results SOCKET     print the JSON lines of a pipeline's results socket (sinks.socket)\n"
               "  engines            installed engines: sha256, board, size, signer, where active\n"
               "  deploy FILE --pipeline P [--sha256 S]\n"
               "                     copy FILE into the engine store, verify it and hot-swap P to it\n"
               "  swap P SHA256      hot-swap P to an installed engine (a unique prefix of 8+ digits will do)\n"
               "  rollback P         swap P back to the engine it ran before\n"
               "  history P          P's deployments, newest first, with the step each reached\n"
               "  unload P           unload P's engine (frames are dropped until the next swap)\n"
               "  delete SHA256      delete an engine from the store (never one a pipeline runs or rolls back to)\n"
               "  prune              delete every engine in the store that no pipeline runs or rolls back to\n"
               "  log-level [LEVEL]  show or set the daemon's log level (debug, info, notice, warning, err)\n");
  return 2;
}

int connect_to(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "edgertctl: cannot connect to %s: %s (is edgertd running?)\n", path.c_str(), strerror(errno));
    return -1;
  }
  return fd;
}

bool read_message(int fd, std::string& buffer, json* message) {
  for (;;) {
    std::string payload;
    auto status = edgert::control::take_frame(buffer, edgert::control::kMaxResponseBytes, &payload);
    if (status == edgert::control::FrameStatus::Complete) {
      *message = json::parse(payload, nullptr, false);
      return !message->is_discarded();
    }
    if (status == edgert::control::FrameStatus::TooLarge) return false;
    char chunk[65536];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

std::string absolute_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  return std::string(getcwd(cwd, sizeof cwd) ? cwd : ".") + "/" + path;
}

void print_step(const json& step, FILE* out) {
  std::fprintf(out, "  %-10s %-4s %8.1f ms  %s\n", step.value("step", "").c_str(), step.value("ok", false) ? "ok" : "FAIL",
               step.value("ms", 0.0), step.value("detail", "").c_str());
}

void print_stats(const json& p) {
  std::printf("%-12s %6.1f fps  in %llu  processed %llu  dropped %llu  errors %llu  copies/frame %.2f\n",
              p["name"].get<std::string>().c_str(), p.value("fps", 0.0), p.value("frames_in", 0ull),
              p.value("processed", 0ull), p.value("dropped", 0ull), p.value("errors", 0ull),
              p.value("frame_copies_per_frame", 0.0));
  if (p.contains("swaps"))
    std::printf("    engine %.12s  swaps %llu  rollbacks %llu  refused %llu\n", p.value("engine", "").c_str(),
                p.value("swaps", 0ull), p.value("rollbacks", 0ull), p.value("swaps_refused", 0ull));
  if (p.contains("latency"))
    for (const char* stage : {"queue", "preprocess", "inference", "postprocess", "total"}) {
      const json& l = p["latency"][stage];
      std::printf("    %-12s p50 %8.2f ms   p99 %8.2f ms\n", stage, l.value("p50_ms", 0.0), l.value("p99_ms", 0.0));
    }
  if (p.contains("last_error")) std::printf("    last error: %s\n", p["last_error"].get<std::string>().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path = edgert::control::kDefaultSocket;
  bool raw_json = false;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    std::string a = argv[i];
    if (a == "--socket" && i + 1 < argc) socket_path = argv[++i];
    else if (a == "--json") raw_json = true;
    else return usage();
  }
  if (i >= argc) return usage();
  std::string command = argv[i++];
  if (command == "results") {
    // The result stream sink is plain newline-delimited JSON: copy it to stdout as it comes.
    if (i >= argc) return usage();
    int fd = connect_to(argv[i]);
    if (fd < 0) return 1;
    char chunk[65536];
    for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) > 0;) {
      fwrite(chunk, 1, static_cast<size_t>(n), stdout);
      std::fflush(stdout);
    }
    return 0;
  }
  json request = {{"command", command}};
  if (command == "watch" || command == "stats") {
    if (i < argc) request["pipeline"] = argv[i++];
    else if (command == "watch") return usage();
  } else if (command == "deploy") {
    for (; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--pipeline" && i + 1 < argc) request["pipeline"] = argv[++i];
      else if (a == "--sha256" && i + 1 < argc) request["sha256"] = argv[++i];
      else if (a[0] != '-' && !request.contains("path")) request["path"] = absolute_path(a);
      else return usage();
    }
    if (!request.contains("path") || !request.contains("pipeline")) return usage();
  } else if (command == "swap") {
    if (i + 2 != argc) return usage();
    request["pipeline"] = argv[i];
    request["sha256"] = argv[i + 1];
  } else if (command == "rollback" || command == "history" || command == "unload") {
    if (i + 1 != argc) return usage();
    request["pipeline"] = argv[i];
  } else if (command == "log-level") {
    if (i < argc) request["level"] = argv[i];
  } else if (command == "delete") {
    if (i + 1 != argc) return usage();
    request["sha256"] = argv[i];
  } else if (command == "prune") {
    if (i != argc) return usage();
  } else if (command != "status" && command != "pipelines" && command != "engines") {
    request = {{"command", command}};  // let the daemon name the commands it has
  }
  int fd = connect_to(socket_path);
  if (fd < 0) return 1;
  std::string framed = edgert::control::frame_message(request.dump());
  if (write(fd, framed.data(), framed.size()) != static_cast<ssize_t>(framed.size())) {
    std::fprintf(stderr, "edgertctl: write failed: %s\n", strerror(errno));
    return 1;
  }
  std::string buffer;
  json response;
  if (!read_message(fd, buffer, &response)) {
    std::fprintf(stderr, "edgertctl: no valid response from %s\n", socket_path.c_str());
    return 1;
  }
  if (!response.value("ok", false)) {
    const json& e = response["error"];
    if (e.contains("details") && e["details"].contains("steps"))
      for (const json& step : e["details"]["steps"]) print_step(step, stderr);
    std::fprintf(stderr, "edgertctl: %s: %s\n", e.value("code", "error").c_str(), e.value("message", "").c_str());
    if (raw_json) std::printf("%s\n", response.dump(2).c_str());
    return 1;
  }
  const json& result = response["result"];
  if (command == "watch") {
    json message;
    while (read_message(fd, buffer, &message)) {
      std::printf("%s\n", message.dump().c_str());
      std::fflush(stdout);
    }
    // The stream only ends when the daemon ends it (stopped, or this reader fell too far behind).
    std::fprintf(stderr, "edgertctl: %s closed the stream of pipeline %s\n", socket_path.c_str(),
                 request["pipeline"].get<std::string>().c_str());
    return 1;
  }
  if (raw_json) {
    std::printf("%s\n", result.dump(2).c_str());
  } else if (command == "status") {
    std::printf("edgertd %s, board %s, up %.0f s, memory %.1f / %.1f MiB\n", result["version"].get<std::string>().c_str(),
                result["board"].get<std::string>().c_str(), result["uptime_s"].get<double>(),
                result["memory"]["used_bytes"].get<double>() / 1048576, result["memory"]["budget_bytes"].get<double>() / 1048576);
    for (const json& p : result["pipelines"]) print_stats(p);
  } else if (command == "stats") {
    for (const json& p : result) print_stats(p);
  } else if (command == "pipelines") {
    for (const json& p : result)
      std::printf("%-12s %s -> %s (%s)\n", p["name"].get<std::string>().c_str(), p["source"].get<std::string>().c_str(),
                  p["engine"].get<std::string>().c_str(), p["postprocess"].get<std::string>().c_str());
  } else if (command == "engines") {
    std::printf("%-64s  %-16s %10s  %-20s %s\n", "sha256", "board", "bytes", "signer", "active in");
    for (const json& e : result) {
      std::string active;
      for (const json& p : e["active_in"]) active += (active.empty() ? "" : ",") + p.get<std::string>();
      std::printf("%-64s  %-16s %10lld  %-20s %s\n", e.value("sha256", "").c_str(), e.value("board", "").c_str(),
                  e.value("size", 0ll), e["signer"].is_string() ? e["signer"].get<std::string>().c_str() : "-",
                  active.empty() ? "-" : active.c_str());
    }
  } else if (command == "deploy" || command == "swap" || command == "rollback") {
    if (result.value("already_active", false)) {
      std::printf("pipeline %s already runs %s; nothing to do\n", result.value("pipeline", "").c_str(),
                  result.value("sha256", "").c_str());
    } else {
      for (const json& step : result["steps"]) print_step(step, stdout);
      std::printf("pipeline %s now runs %s (%s, %.1f ms); previous %s kept for rollback\n",
                  result.value("pipeline", "").c_str(), result.value("sha256", "").c_str(),
                  result.value("mode", "").c_str(), result.value("duration_ms", 0.0),
                  result.value("previous", "").empty() ? "(none)" : result.value("previous", "").substr(0, 12).c_str());
    }
  } else if (command == "history") {
    for (const json& d : result)
      std::printf("#%-5lld %-12s %-12s %-12s %-10s %s\n", d.value("id", 0ll),
                  d["sha256"].is_string() ? d["sha256"].get<std::string>().substr(0, 12).c_str() : "-",
                  d["previous_sha256"].is_string() ? d["previous_sha256"].get<std::string>().substr(0, 12).c_str() : "-",
                  d.value("state", "").c_str(), d["step"].is_string() ? d["step"].get<std::string>().c_str() : "-",
                  d["message"].is_string() ? d["message"].get<std::string>().c_str() : "");
  } else if (command == "log-level") {
    std::printf("%s\n", result.value("level", "").c_str());
  } else if (command == "delete" || command == "prune") {
    for (const json& sha : result["deleted"]) std::printf("deleted %s\n", sha.get<std::string>().c_str());
    if (result.contains("kept"))
      for (const json& k : result["kept"])
        std::printf("kept    %s (%s)\n", k.value("sha256", "").c_str(), k.value("why", "").c_str());
  } else {
    std::printf("%s\n", result.dump(2).c_str());
  }
  close(fd);
  return 0;
}

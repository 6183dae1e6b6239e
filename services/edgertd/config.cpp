#include "config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "board_catalog.h"
#include "yaml_tree.h"

namespace edgert::daemon {
namespace {

using config::YamlNode;
using config::YamlReader;

std::vector<float> float_list(const YamlReader& r, const YamlNode& node, const std::string& key, size_t count) {
  if (node.kind != YamlNode::Kind::Sequence || node.items.size() != count)
    r.fail(node, "'" + key + "' must be a list of " + std::to_string(count) + " numbers");
  std::vector<float> out;
  for (const auto& item : node.items) out.push_back(static_cast<float>(r.number_value(*item, key)));
  return out;
}

SourceConfig parse_source(const YamlReader& r, const YamlNode& n) {
  r.expect_keys(n, {"type", "device", "width", "height", "fps", "format", "io", "buffers", "trigger"}, "source");
  SourceConfig s;
  s.type = r.string_value(r.require(n, "type", "source"), "source.type");
  if (s.type != "test-pattern" && s.type != "v4l2") r.fail(*n.get("type"), "source.type must be test-pattern or v4l2");
  if (const YamlNode* d = n.get("device")) s.device = r.string_value(*d, "source.device");
  if (s.type == "v4l2" && s.device.empty()) r.fail(n, "a v4l2 source needs 'device'");
  if (const YamlNode* v = n.get("width")) s.width = static_cast<int>(r.int_value(*v, "source.width", 16, 8192));
  if (const YamlNode* v = n.get("height")) s.height = static_cast<int>(r.int_value(*v, "source.height", 16, 8192));
  if (const YamlNode* v = n.get("fps")) s.fps = static_cast<int>(r.int_value(*v, "source.fps", 1, 480));
  if (const YamlNode* v = n.get("format")) {
    std::string f = r.string_value(*v, "source.format");
    if (!parse_pixel_format(f, &s.format)) r.fail(*v, "source.format must be yuyv, nv12, rgb24 or mjpeg, got '" + f + "'");
  }
  if (s.type == "test-pattern") s.io = "userptr";
  if (const YamlNode* v = n.get("io")) {
    s.io = r.string_value(*v, "source.io");
    if (s.type == "test-pattern" && s.io != "mmap" && s.io != "userptr")
      r.fail(*v, "source.io of a test-pattern must be userptr (frames in the board's frame memory) or mmap (host "
                 "memory, as a driver's own buffers)");
    if (s.io != "mmap" && s.io != "dmabuf" && s.io != "userptr")
      r.fail(*v, "source.io must be mmap, dmabuf or userptr");
  }
  if (const YamlNode* v = n.get("buffers")) s.buffers = static_cast<int>(r.int_value(*v, "source.buffers", 2, 32));
  if (const YamlNode* v = n.get("trigger")) {
    std::string t = r.string_value(*v, "source.trigger");
    if (t != "none" && t != "gpio") r.fail(*v, "source.trigger must be none or gpio");
    s.triggered = t == "gpio";
  }
  if (s.format == PixelFormat::NV12 && (s.width % 2 || s.height % 2)) r.fail(n, "nv12 needs an even width and height");
  return s;
}

PreprocessConfig parse_preprocess(const YamlReader& r, const YamlNode& n) {
  r.expect_keys(n, {"channel_order", "mean", "std"}, "preprocess");
  PreprocessConfig p;
  if (const YamlNode* v = n.get("channel_order")) {
    p.channel_order = r.string_value(*v, "preprocess.channel_order");
    if (p.channel_order != "rgb" && p.channel_order != "bgr") r.fail(*v, "preprocess.channel_order must be rgb or bgr");
  }
  if (const YamlNode* v = n.get("mean")) p.mean = float_list(r, *v, "preprocess.mean", 3);
  if (const YamlNode* v = n.get("std")) {
    p.std = float_list(r, *v, "preprocess.std", 3);
    for (float s : p.std)
      if (s <= 0) r.fail(*v, "preprocess.std values must be positive");
  }
  return p;
}

PostprocessConfig parse_postprocess(const YamlReader& r, const YamlNode& n) {
  r.expect_keys(n, {"type", "top_k", "labels", "score_threshold", "iou_threshold"}, "postprocess");
  PostprocessConfig p;
  p.type = r.string_value(r.require(n, "type", "postprocess"), "postprocess.type");
  if (p.type != "classification" && p.type != "detection" && p.type != "segmentation" && p.type != "raw")
    r.fail(*n.get("type"), "postprocess.type must be classification, detection, segmentation or raw");
  if (const YamlNode* v = n.get("top_k")) p.top_k = static_cast<int>(r.int_value(*v, "postprocess.top_k", 1, 1000));
  if (const YamlNode* v = n.get("labels")) p.labels = r.string_value(*v, "postprocess.labels");
  if (const YamlNode* v = n.get("score_threshold")) p.score_threshold = static_cast<float>(r.number_value(*v, "postprocess.score_threshold"));
  if (const YamlNode* v = n.get("iou_threshold")) p.iou_threshold = static_cast<float>(r.number_value(*v, "postprocess.iou_threshold"));
  return p;
}

void parse_sinks(const YamlReader& r, const YamlNode& n, PipelineConfig& p) {
  r.expect_keys(n, {"socket", "sqlite", "gpio", "journal"}, "sinks");
  if (const YamlNode* s = n.get("socket")) {
    r.expect_keys(*s, {"path", "buffer_kb"}, "sinks.socket");
    p.socket.enabled = true;
    p.socket.path = r.string_value(r.require(*s, "path", "sinks.socket"), "sinks.socket.path");
    if (const YamlNode* v = s->get("buffer_kb"))
      p.socket.buffer_kb = static_cast<int>(r.int_value(*v, "sinks.socket.buffer_kb", 4, 65536));
  }
  if (const YamlNode* s = n.get("sqlite")) {
    r.expect_keys(*s, {"retention_days"}, "sinks.sqlite");
    p.sqlite.enabled = true;
    if (const YamlNode* v = s->get("retention_days"))
      p.sqlite.retention_days = static_cast<int>(r.int_value(*v, "sinks.sqlite.retention_days", 1, 3650));
  }
  if (const YamlNode* s = n.get("gpio")) {
    r.expect_keys(*s, {"chip", "detect_line", "classes", "min_score", "heartbeat_line", "trigger_line"}, "sinks.gpio");
    p.gpio.enabled = true;
    p.gpio.chip = r.string_value(r.require(*s, "chip", "sinks.gpio"), "sinks.gpio.chip");
    if (const YamlNode* v = s->get("detect_line")) p.gpio.detect_line = static_cast<int>(r.int_value(*v, "sinks.gpio.detect_line", 0, 1023));
    if (const YamlNode* v = s->get("classes")) p.gpio.classes = r.string_list(*v, "sinks.gpio.classes");
    if (const YamlNode* v = s->get("min_score")) p.gpio.min_score = static_cast<float>(r.number_value(*v, "sinks.gpio.min_score"));
    if (const YamlNode* v = s->get("heartbeat_line")) p.gpio.heartbeat_line = static_cast<int>(r.int_value(*v, "sinks.gpio.heartbeat_line", 0, 1023));
    if (const YamlNode* v = s->get("trigger_line")) p.gpio.trigger_line = static_cast<int>(r.int_value(*v, "sinks.gpio.trigger_line", 0, 1023));
  }
  if (const YamlNode* s = n.get("journal")) {
    r.expect_keys(*s, {"every_n"}, "sinks.journal");
    p.journal.enabled = true;
    if (const YamlNode* v = s->get("every_n")) p.journal.every_n = static_cast<int>(r.int_value(*v, "sinks.journal.every_n", 1, 1000000));
  }
}

// Two users of one socket path would each lose what the other's clients expect: the second
// bind replaces the first socket. The state database is a file the daemon must not replace.
class SocketPathUsers {
 public:
  SocketPathUsers(const YamlReader& r, const std::string& state_dir) : r_(r) {
    users_[normal(state_dir + "/edgertd.db")] = "the state database (state_dir)";
  }
  void add(const YamlNode* at, const std::string& path, const std::string& user) {
    auto [it, fresh] = users_.emplace(normal(path), user);
    if (fresh) return;
    std::string message = user + " '" + path + "' is already used by " + it->second + "; each socket needs a path of its own";
    if (at) r_.fail(*at, message);
    throw config::ConfigError(r_.file() + ": " + message);
  }

 private:
  static std::string normal(const std::string& path) { return std::filesystem::path(path).lexically_normal().string(); }
  const YamlReader& r_;
  std::map<std::string, std::string> users_;
};

// `listen: HOST:PORT`, HOST one of the loopback names; IPv6 in brackets ([::1]:9464).
void parse_metrics_listen(const YamlReader& r, const YamlNode& at, MetricsConfig& m) {
  const std::string text = r.string_value(at, "metrics.listen");
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size())
    r.fail(at, "metrics.listen '" + text + "' must be HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464");
  std::string host = text.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host != "127.0.0.1" && host != "::1" && host != "localhost")
    r.fail(at, "metrics.listen '" + text + "': '" + host + "' is not a loopback address; edgertd serves metrics only on "
               "127.0.0.1, ::1 or localhost (the endpoint has no authentication: scrape it through a proxy or a tunnel, "
               "or use metrics.socket)");
  const std::string port = text.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) < 1 ||
      std::stoi(port) > 65535)
    r.fail(at, "metrics.listen '" + text + "': the port must be a number from 1 to 65535");
  m.listen_host = host;
  m.listen_port = std::stoi(port);
}

MetricsConfig parse_metrics(const YamlReader& r, const YamlNode& n) {
  r.expect_keys(n, {"socket", "listen"}, "metrics");
  MetricsConfig m;
  const YamlNode* socket = n.get("socket");
  const YamlNode* listen = n.get("listen");
  if (!socket == !listen) r.fail(n, "metrics needs exactly one of 'socket' (a Unix socket path) or 'listen' (127.0.0.1:PORT)");
  if (socket) {
    m.socket = r.string_value(*socket, "metrics.socket");
    if (m.socket.empty()) r.fail(*socket, "metrics.socket must be a path");
  }
  if (listen) parse_metrics_listen(r, *listen, m);
  return m;
}

}  // namespace

std::string MetricsConfig::describe() const {
  if (!socket.empty()) return "unix:" + socket;
  return (listen_host == "::1" ? "[::1]" : listen_host) + ":" + std::to_string(listen_port);
}

std::string read_config_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw config::ConfigError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int error = errno;
    close(fd);
    throw config::ConfigError(path + ": cannot stat: " + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    const char* kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket"
                       : (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? "a device" : "not a regular file";
    throw config::ConfigError(path + ": is " + std::string(kind) + "; the configuration must be a regular YAML file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxConfigBytes) {
    close(fd);
    throw config::ConfigError(path + ": " + std::to_string(st.st_size) + " bytes, larger than " +
                              std::to_string(kMaxConfigBytes >> 20) + " MiB: not a configuration file");
  }
  std::string text;
  char chunk[65536];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      close(fd);
      throw config::ConfigError(path + ": cannot read: " + std::strerror(error));
    }
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
    // The size was checked, but the file may grow while we read it.
    if (text.size() > kMaxConfigBytes) {
      close(fd);
      throw config::ConfigError(path + ": grew past " + std::to_string(kMaxConfigBytes >> 20) + " MiB while being read");
    }
  }
  close(fd);
  return text;
}

int log_level_from_name(const std::string& name) {
  static const char* names[] = {"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"};
  for (int i = 0; i < 8; ++i)
    if (name == names[i]) return i;
  return -1;
}

DaemonConfig load_daemon_config(const std::string& path) {
  auto root = config::load_yaml_string(read_config_file(path), path);
  YamlReader r(*root, path);
  r.expect_keys(*root, {"board", "memory_budget_mb", "mlock_weights", "plugin_path", "control_socket", "control_idle_timeout_s",
                        "state_dir", "require_signed", "trusted_keys_dir", "swap_stop_first", "log_level", "metrics", "pipelines"},
                "edgertd configuration");
  DaemonConfig c;
  c.source_path = path;
  const YamlNode* board = root->get("board");
  if (board) c.board = r.string_value(*board, "board");
  try {
    c.board_profile = config::resolve_board(c.board).profile;
  } catch (const config::ConfigError& e) {
    if (board) r.fail(*board, e.what());
    throw;
  }
  if (const YamlNode* v = root->get("memory_budget_mb")) c.memory_budget_mb = r.int_value(*v, "memory_budget_mb", 16, 1 << 24);
  if (const YamlNode* v = root->get("mlock_weights")) c.mlock_weights = r.bool_value(*v, "mlock_weights");
  if (const YamlNode* v = root->get("plugin_path")) c.plugin_path = r.string_value(*v, "plugin_path");
  if (const YamlNode* v = root->get("control_socket")) c.control_socket = r.string_value(*v, "control_socket");
  if (const YamlNode* v = root->get("control_idle_timeout_s"))
    c.control_idle_timeout_s = static_cast<int>(r.int_value(*v, "control_idle_timeout_s", 1, 86400));
  if (const YamlNode* v = root->get("state_dir")) c.state_dir = r.string_value(*v, "state_dir");
  SocketPathUsers socket_users(r, c.state_dir);
  socket_users.add(root->get("control_socket"), c.control_socket, "control_socket");
  if (const YamlNode* v = root->get("require_signed")) c.require_signed = r.bool_value(*v, "require_signed");
  if (const YamlNode* v = root->get("trusted_keys_dir")) c.trusted_keys_dir = r.string_value(*v, "trusted_keys_dir");
  if (const YamlNode* v = root->get("swap_stop_first")) c.swap_stop_first = r.bool_value(*v, "swap_stop_first");
  if (const YamlNode* v = root->get("log_level")) {
    c.log_level = r.string_value(*v, "log_level");
    if (log_level_from_name(c.log_level) < 0)
      r.fail(*v, "log_level '" + c.log_level + "' must be one of debug, info, notice, warning, err");
  }
  if (const YamlNode* v = root->get("metrics")) {
    c.metrics = parse_metrics(r, *v);
    if (!c.metrics.socket.empty()) socket_users.add(v->get("socket"), c.metrics.socket, "metrics.socket");
  }
  const YamlNode& pipelines = r.require(*root, "pipelines", "edgertd configuration");
  if (pipelines.kind != YamlNode::Kind::Sequence || pipelines.items.empty())
    r.fail(pipelines, "'pipelines' must be a non-empty list");
  for (const auto& item : pipelines.items) {
    const YamlNode& n = *item;
    r.expect_keys(n, {"name", "source", "preprocess", "engine", "queue_depth", "priority", "gpu_share", "postprocess",
                      "sinks"},
                  "pipeline");
    PipelineConfig p;
    p.name = r.string_value(r.require(n, "name", "pipeline"), "name");
    if (p.name.empty() || p.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos)
      r.fail(*n.get("name"), "pipeline name '" + p.name + "' must be letters, digits, '_' or '-'");
    for (const PipelineConfig& other : c.pipelines)
      if (other.name == p.name) r.fail(*n.get("name"), "duplicate pipeline name '" + p.name + "'");
    p.source = parse_source(r, r.require(n, "source", "pipeline '" + p.name + "'"));
    if (const YamlNode* v = n.get("preprocess")) p.preprocess = parse_preprocess(r, *v);
    p.engine = r.string_value(r.require(n, "engine", "pipeline '" + p.name + "'"), "engine");
    if (const YamlNode* v = n.get("queue_depth"))
      p.queue_depth = static_cast<int>(r.int_value(*v, "pipeline.queue_depth", 1, 8));
    if (const YamlNode* v = n.get("priority"))
      p.gpu.priority = static_cast<int>(r.int_value(*v, "pipeline.priority", 0, 10));
    if (const YamlNode* v = n.get("gpu_share"))
      p.gpu.gpu_share = static_cast<int>(r.int_value(*v, "pipeline.gpu_share", 1, 100));
    p.postprocess = parse_postprocess(r, r.require(n, "postprocess", "pipeline '" + p.name + "'"));
    if (const YamlNode* v = n.get("sinks")) {
      parse_sinks(r, *v, p);
      if (p.socket.enabled)
        socket_users.add(v->get("socket")->get("path"), p.socket.path, "pipeline '" + p.name + "' sinks.socket.path");
    }
    if (p.source.triggered && (!p.gpio.enabled || p.gpio.trigger_line < 0))
      r.fail(n, "pipeline '" + p.name + "': source.trigger gpio needs sinks.gpio.trigger_line");
    c.pipelines.push_back(std::move(p));
  }
  return c;
}

}  // namespace edgert::daemon

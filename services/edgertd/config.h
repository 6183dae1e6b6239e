// edgertd's configuration: /etc/edgert/edgertd.yaml, validated strictly (unknown keys are
// errors; every error names file:line:column and the key).
#pragma once

#include <string>
#include <vector>

#include "board_profile.h"
#include "frame_source.h"

namespace edgert::daemon {

struct PreprocessConfig {
  std::string channel_order = "rgb";            // rgb | bgr
  std::vector<float> mean = {0.0f, 0.0f, 0.0f};  // subtracted after scaling pixels to [0, 1]
  std::vector<float> std = {1.0f, 1.0f, 1.0f};
};

struct PostprocessConfig {
  std::string type = "classification";  // classification | detection | segmentation | raw
  int top_k = 5;
  std::string labels;                   // file with one label per line, optional
  float score_threshold = 0.5f;         // detection
  float iou_threshold = 0.45f;          // detection NMS (for models that do not do their own)
};

struct SocketSinkConfig {
  bool enabled = false;
  std::string path;  // Unix socket streaming newline-delimited JSON results
  int buffer_kb = 1024;  // per client: unread results beyond this are dropped, oldest first
};

struct SqliteSinkConfig {
  bool enabled = false;
  int retention_days = 7;
};

struct GpioPipelineConfig {
  bool enabled = false;
  std::string chip;
  int detect_line = -1;
  std::vector<std::string> classes;  // labels (or numeric ids) that drive the detect line
  float min_score = 0.5f;
  int heartbeat_line = -1;
  int trigger_line = -1;             // an input: a rising edge makes the source capture
};

struct JournalSinkConfig {
  bool enabled = false;
  int every_n = 30;  // log one result in N
};

// How a pipeline's engine shares the GPU with the others' (engine_handle.h applies it).
struct GpuScheduling {
  // Stream priority (0-10, larger first; 0 the default): a higher pipeline's kernels are
  // scheduled ahead of the others' waiting ones.
  int priority = 0;
  // Percent of the GPU's multiprocessors its kernels may use (1-100; 100 the default): a heavy
  // pipeline confined to part of the GPU cannot hold back the others' kernels.
  int gpu_share = 100;
};

struct PipelineConfig {
  std::string name;
  SourceConfig source;
  PreprocessConfig preprocess;
  std::string engine;  // engine file path
  int queue_depth = 2;  // frames that may wait for the worker; beyond that the oldest is dropped
  GpuScheduling gpu;
  PostprocessConfig postprocess;
  SocketSinkConfig socket;
  SqliteSinkConfig sqlite;
  GpioPipelineConfig gpio;
  JournalSinkConfig journal;
};

// The Prometheus endpoint (GET /metrics), off unless one of the two is set: a Unix socket, or a
// TCP port on the loopback interface only (the metrics name pipelines and engines, and the
// endpoint has no authentication: a scraper elsewhere reaches it through a proxy or a tunnel).
struct MetricsConfig {
  std::string socket;       // Unix socket path
  std::string listen_host;  // 127.0.0.1, ::1 or localhost (which binds 127.0.0.1)
  int listen_port = 0;
  bool enabled() const { return !socket.empty() || listen_port > 0; }
  std::string describe() const;  // "unix:/run/edgert/metrics.sock" or "127.0.0.1:9464"
};

struct DaemonConfig {
  std::string source_path;
  // `board:` as written: a profile name or path, or native (this machine: the profile
  // `edgert build` picks by default, board_catalog.h); resolved into board_profile, whose name
  // engines must carry.
  std::string board = "native";
  config::BoardProfile board_profile;
  int64_t memory_budget_mb = 0;  // 0: the board profile's edgertd_budget_mb
  bool mlock_weights = false;
  std::string plugin_path;       // empty: libedgert's default search path
  std::string control_socket = "/run/edgert/control.sock";
  // A control connection silent this long is closed (a `watch` stream is exempt: it only listens).
  int control_idle_timeout_s = 30;
  std::string state_dir = "/var/lib/edgert";  // edgertd.db, engines/ (the store), active/
  // Hot swap: refuse engines without a valid signature by a key in trusted_keys_dir.
  bool require_signed = false;
  std::string trusted_keys_dir = "/etc/edgert/trusted-keys.d";
  // When the old and the new engine do not both fit the budget: unload the old one first
  // (frames are dropped while the new one loads; on failure the old one is loaded again).
  bool swap_stop_first = false;
  std::string log_level = "info";  // debug | info | notice | warning | err
  MetricsConfig metrics;           // read at start: a reload keeps the running endpoint
  std::vector<PipelineConfig> pipelines;
};

// syslog priority (LOG_ERR = 3 ... LOG_DEBUG = 7) of a level name, or -1.
int log_level_from_name(const std::string& name);

// Throws config::ConfigError ("file:line:column: message") on any problem. The file must be a
// regular file of at most 1 MiB (a directory, FIFO or device is refused without reading it).
// Every socket path must have one user: the control socket, one pipeline's results socket.
DaemonConfig load_daemon_config(const std::string& path);

// The configuration file's text: a regular file of at most kMaxConfigBytes, opened without
// blocking (a FIFO or device cannot hang or flood the caller). Throws config::ConfigError.
constexpr size_t kMaxConfigBytes = 1u << 20;
std::string read_config_file(const std::string& path);

}  // namespace edgert::daemon

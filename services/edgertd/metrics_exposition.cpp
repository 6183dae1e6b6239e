// The exposition text is written here by hand rather than with prometheus-cpp: its pull
// exposer (civetweb) listens on TCP ports only, never on a Unix socket, and runs threads of its
// own beside the daemon's sd-event loop, while the text format is a few lines per metric.
// MetricsServer serves this text from the loop.
#include "metrics_exposition.h"

#include <cmath>
#include <cstdio>

namespace edgert::daemon {
namespace {

// A label value: backslash, double quote and newline escaped, as the format requires.
std::string label_value(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

std::string number(uint64_t value) { return std::to_string(value); }

class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    text_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  // `labels` already written: pipeline="cam",stage="total"
  void sample(const std::string& name, const std::string& labels, const std::string& value) {
    text_ += name;
    if (!labels.empty()) text_ += "{" + labels + "}";
    text_ += " " + value + "\n";
  }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
};

std::string pipeline_label(const PipelineSnapshot& p) { return "pipeline=\"" + label_value(p.name) + "\""; }

// One counter or gauge per pipeline, read from the snapshot by `value`.
template <typename Value>
void per_pipeline(Exposition& out, const DaemonSnapshot& s, const char* name, const char* type, const char* help,
                  Value value) {
  out.family(name, type, help);
  for (const PipelineSnapshot& p : s.pipelines) out.sample(name, pipeline_label(p), number(value(p)));
}

void histogram_samples(Exposition& out, const std::string& labels, const LatencyHistogram& h) {
  const std::string name = "edgertd_stage_latency_seconds";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.buckets.size(); ++i) {
    cumulative += h.buckets[i];
    out.sample(name + "_bucket", labels + ",le=\"" + number(kLatencyBucketBoundsUs[i] / 1e6) + "\"", number(cumulative));
  }
  out.sample(name + "_bucket", labels + ",le=\"+Inf\"", number(h.count));
  out.sample(name + "_sum", labels, number(h.sum_us / 1e6));
  out.sample(name + "_count", labels, number(h.count));
}

}  // namespace

std::string prometheus_exposition(const DaemonSnapshot& s) {
  Exposition out;
  per_pipeline(out, s, "edgertd_pipeline_fps", "gauge", "Results per second over the last two seconds of captures.",
               [](const PipelineSnapshot& p) { return p.stats.fps; });
  per_pipeline(out, s, "edgertd_frames_total", "counter", "Frames the source delivered to the pipeline.",
               [](const PipelineSnapshot& p) { return p.stats.frames_in; });
  per_pipeline(out, s, "edgertd_frames_processed_total", "counter", "Frames that became results.",
               [](const PipelineSnapshot& p) { return p.stats.processed; });
  per_pipeline(out, s, "edgertd_frames_dropped_total", "counter",
               "Frames dropped unprocessed: pushed out of a full queue, or arrived while no engine was loaded.",
               [](const PipelineSnapshot& p) { return p.stats.dropped; });
  per_pipeline(out, s, "edgertd_frame_errors_total", "counter", "Frames whose preprocess, inference or postprocess failed.",
               [](const PipelineSnapshot& p) { return p.stats.errors; });
  per_pipeline(out, s, "edgertd_source_gaps_total", "counter", "Frames the camera driver skipped (sequence gaps).",
               [](const PipelineSnapshot& p) { return p.stats.source_gaps; });

  out.family("edgertd_stage_latency_seconds", "histogram",
             "Time a frame spent in each stage since start; total is capture to result.");
  for (const PipelineSnapshot& p : s.pipelines) {
    const PipelineStats& st = p.stats;
    const std::pair<const char*, const LatencySummary*> stages[] = {
        {"queue", &st.queue}, {"preprocess", &st.preprocess}, {"inference", &st.inference},
        {"postprocess", &st.postprocess}, {"total", &st.total}, {"gpu", &st.gpu}};
    for (const auto& [stage, summary] : stages) {
      // The GPU's own time exists only for engines with a device.
      if (std::string(stage) == "gpu" && summary->since_start.count == 0) continue;
      histogram_samples(out, pipeline_label(p) + ",stage=\"" + stage + "\"", summary->since_start);
    }
  }

  out.family("edgertd_engine_info", "gauge",
             "The engine a pipeline runs, by id (sha256): 1; 0 with engine=\"\" while none is loaded.");
  for (const PipelineSnapshot& p : s.pipelines)
    out.sample("edgertd_engine_info", pipeline_label(p) + ",engine=\"" + label_value(p.stats.engine) + "\"",
               p.stats.engine.empty() ? "0" : "1");
  per_pipeline(out, s, "edgertd_engine_swaps_total", "counter", "Swaps and deploys that switched the pipeline's engine.",
               [](const PipelineSnapshot& p) { return p.swaps.swaps; });
  per_pipeline(out, s, "edgertd_engine_rollbacks_total", "counter", "Rollbacks that switched the pipeline's engine back.",
               [](const PipelineSnapshot& p) { return p.swaps.rollbacks; });
  per_pipeline(out, s, "edgertd_engine_swaps_refused_total", "counter",
               "Swaps, deploys and rollbacks refused at a step (the running engine kept).",
               [](const PipelineSnapshot& p) { return p.swaps.refused; });

  out.family("edgertd_memory_used_bytes", "gauge",
             "Memory counted against the budget: reservations plus what slow socket readers hold.");
  out.sample("edgertd_memory_used_bytes", "", number(s.memory_used_bytes()));
  out.family("edgertd_memory_reserved_bytes", "gauge", "Memory reserved for engines and frame buffers.");
  out.sample("edgertd_memory_reserved_bytes", "", number(s.memory_reserved_bytes));
  out.family("edgertd_memory_budget_bytes", "gauge", "The memory budget (0: none).");
  out.sample("edgertd_memory_budget_bytes", "", number(s.memory_budget_bytes));
  return out.take();
}

}  // namespace edgert::daemon

#include "sqlite_sink.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <vector>

namespace edgert::daemon {

namespace {

constexpr uint64_t kMinuteNs = 60ull * 1000000000ull;

// Reservoir sampling (Vitter's algorithm R): a uniform sample of a stream in fixed memory, so a
// minute at 240 fps costs the same as one at 5 fps.
class LatencyReservoir {
 public:
  explicit LatencyReservoir(size_t capacity) : capacity_(capacity) {}

  void add(double value_us, uint64_t& rng_state) {
    ++seen_;
    if (samples_.size() < capacity_) {
      samples_.push_back(static_cast<float>(value_us));
      return;
    }
    uint64_t slot = next_random(rng_state) % seen_;
    if (slot < capacity_) samples_[slot] = static_cast<float>(value_us);
  }

  // Nearest-rank quantiles (the smallest sample with at least p of the samples at or below it),
  // so known latencies 1..100 give p50 = 50 and p99 = 99 exactly. Reorders the samples.
  LatencyQuantiles quantiles() {
    LatencyQuantiles q;
    if (samples_.empty()) return q;
    q.p50_us = nth(0.50);
    q.p99_us = nth(0.99);
    return q;
  }

  void clear() {
    samples_.clear();  // keeps the capacity: the next minute reuses the allocation
    seen_ = 0;
  }

 private:
  static uint64_t next_random(uint64_t& state) {  // xorshift64: cheap, and quality is plenty here
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }

  double nth(double p) {
    size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(samples_.size())));
    size_t index = rank > 0 ? rank - 1 : 0;
    std::nth_element(samples_.begin(), samples_.begin() + static_cast<std::ptrdiff_t>(index), samples_.end());
    return samples_[index];
  }

  size_t capacity_;
  uint64_t seen_ = 0;
  std::vector<float> samples_;
};

}  // namespace

struct SqliteSink::PipelineMinute {
  explicit PipelineMinute(size_t reservoir_size)
      : queue(reservoir_size), preprocess(reservoir_size), inference(reservoir_size),
        postprocess(reservoir_size), total(reservoir_size) {}

  std::string pipeline;
  uint64_t minute_start_ns = 0;
  // Where this bucket's observation began: the minute start, or later for the pipeline's first
  // minute and after a flush, so fps is not diluted by time the sink did not watch.
  uint64_t window_start_ns = 0;
  uint64_t frames = 0;
  uint64_t drops = 0;
  LatencyReservoir queue, preprocess, inference, postprocess, total;

  // Carried across minutes.
  bool have_sequence = false;
  uint64_t last_sequence = 0;
  std::string engine;
  uint64_t rng_state = 0x9e3779b97f4a7c15ull;
};

SqliteSink::SqliteSink(SqliteStore& store, SqliteSinkOptions options) : store_(store), options_(std::move(options)) {
  if (options_.reservoir_size == 0) options_.reservoir_size = 1;
}

SqliteSink::~SqliteSink() { flush(); }

std::string SqliteSink::describe() const { return "sqlite:" + store_.path(); }

void SqliteSink::publish(const Result& result) {
  uint64_t now = options_.clock();
  uint64_t minute = now - now % kMinuteNs;

  auto& slot = pipelines_[result.pipeline];
  if (!slot) {
    slot = std::make_unique<PipelineMinute>(options_.reservoir_size);
    slot->pipeline = result.pipeline;
    slot->minute_start_ns = minute;
    slot->window_start_ns = now;
    slot->engine = result.engine;
    record_event(result.pipeline, "first_result", "first result from pipeline " + result.pipeline,
                 {{"sequence", result.sequence}, {"engine", result.engine}});
  }
  PipelineMinute& p = *slot;

  if (minute != p.minute_start_ns) {
    close_minute(p, now);
    p.minute_start_ns = minute;
    p.window_start_ns = minute;
  }

  ++p.frames;
  // Sequence gaps are frames the source or the queue dropped before a result existed. A sequence
  // that goes backwards means the source restarted: start counting afresh rather than guess.
  if (p.have_sequence && result.sequence > p.last_sequence + 1) p.drops += result.sequence - p.last_sequence - 1;
  p.have_sequence = true;
  p.last_sequence = result.sequence;

  const StageTimes& t = result.times;
  p.queue.add(t.queue_us, p.rng_state);
  p.preprocess.add(t.preprocess_us, p.rng_state);
  p.inference.add(t.inference_us, p.rng_state);
  p.postprocess.add(t.postprocess_us, p.rng_state);
  p.total.add(t.total_us, p.rng_state);

  if (result.engine != p.engine) {
    record_event(result.pipeline, "engine_changed", "pipeline " + result.pipeline + " now runs engine " + result.engine,
                 {{"from", p.engine}, {"to", result.engine}, {"sequence", result.sequence}});
    p.engine = result.engine;
  }

  maybe_prune(now);
}

void SqliteSink::close_minute(PipelineMinute& p, uint64_t now_ns) {
  if (p.frames > 0) {
    MinuteMetrics m;
    m.pipeline = p.pipeline;
    m.minute_start_ns = p.minute_start_ns;
    m.frames = p.frames;
    m.drops = p.drops;
    uint64_t window_end = std::min(now_ns, p.minute_start_ns + kMinuteNs);
    double seconds = window_end > p.window_start_ns ? static_cast<double>(window_end - p.window_start_ns) / 1e9 : 0;
    m.fps = seconds > 0 ? static_cast<double>(p.frames) / seconds : 0;
    m.queue = p.queue.quantiles();
    m.preprocess = p.preprocess.quantiles();
    m.inference = p.inference.quantiles();
    m.postprocess = p.postprocess.quantiles();
    m.total = p.total.quantiles();
    try {
      store_.record_minute_metrics(m);
    } catch (const std::exception& error) {
      note_failure(error);  // the row is dropped: holding it would grow memory while the disk is full
    }
  }
  p.frames = 0;
  p.drops = 0;
  for (LatencyReservoir* r : {&p.queue, &p.preprocess, &p.inference, &p.postprocess, &p.total}) r->clear();
}

void SqliteSink::tick() {
  uint64_t now = options_.clock();
  for (auto& [name, p] : pipelines_)
    if (p->frames > 0 && now >= p->minute_start_ns + kMinuteNs) {
      close_minute(*p, now);
      // The next result decides which minute it belongs to; until then nothing is open.
    }
  maybe_prune(now);
}

void SqliteSink::flush() {
  uint64_t now = options_.clock();
  for (auto& [name, p] : pipelines_) {
    close_minute(*p, now);
    p->window_start_ns = now;
  }
}

void SqliteSink::record_event(const std::string& pipeline, const std::string& kind, const std::string& message,
                              nlohmann::json details) {
  EventRecord event;
  event.time_ns = options_.clock();
  event.pipeline = pipeline;
  event.kind = kind;
  event.message = message;
  event.details = std::move(details);
  try {
    store_.record_event(event);
  } catch (const std::exception& error) {
    note_failure(error);
  }
}

void SqliteSink::maybe_prune(uint64_t now_ns) {
  uint64_t interval_ns = static_cast<uint64_t>(options_.prune_interval.count()) * 1000000000ull;
  if (last_prune_ns_ != 0 && now_ns - last_prune_ns_ < interval_ns) return;
  last_prune_ns_ = now_ns;  // also on failure: retrying every frame against a sick disk helps no one
  try {
    store_.prune(options_.retention, now_ns);
  } catch (const std::exception& error) {
    note_failure(error);
  }
}

void SqliteSink::note_failure(const std::exception& error) {
  ++write_failures_;
  last_error_ = error.what();
  if (options_.on_error) options_.on_error(last_error_);
}

}  // namespace edgert::daemon

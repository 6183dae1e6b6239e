#include "tactic_tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "build_error.h"
#include "edgert/dtype_info.h"
#include "edgert/float16.h"
#include "node_view.h"

namespace edgert::builder {
namespace {

using Clock = std::chrono::steady_clock;

// Runs of a device kernel in the CUDA graph one timing replays (TacticTimer::capture), at least.
constexpr int kGraphRepeats = 10;
// In an engine a layer's weights come from device memory: every other layer's went through the
// cache since this one last ran. Repeated runs of one node would find its weights in the GPU's
// L2 instead, which favours the algorithms that gain most from that (cuBLASLt's split-K, whose
// extra reduction kernel then cost vit_b_16's second MLP product more than it saved). The
// graph's runs take turns over copies of the node's device constants, enough copies to span this
// many bytes (about twice an H100's or H200's L2; boards have far less), at most kMaxCopies.
constexpr size_t kColdBytes = size_t{96} << 20;
constexpr int kMaxCopies = 64;

double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string format_float(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

std::string format_ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, ms < 1 ? "%.4f ms" : "%.3f ms", ms);
  return text;
}

std::string tensor_signature(const Value& v) {
  std::string s = edgert_dtype_name(v.dtype);
  if (!v.rank_known) return s + "[?]";
  s += "[";
  for (size_t d = 0; d < v.shape.size(); ++d) s += (d ? "," : "") + std::to_string(v.shape[d].value);
  return s + "]";
}

// Scratch for tensors and workspaces: 64-byte aligned, zeroed host memory, or the device
// memory of a device kernel's plugin (tensors it reads and writes live there).
struct AlignedBuffer {
  struct Free {
    const edgert_device* device = nullptr;
    void operator()(void* p) const {
      if (device) device->free(device->kernel_space, p);
      else std::free(p);
    }
  };
  std::unique_ptr<void, Free> data;

  explicit AlignedBuffer(size_t bytes, const edgert_device* device = nullptr) : data(nullptr, Free{device}) {
    size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    if (device) {
      void* p = nullptr;
      edgert_error error{};
      if (device->allocate(device->kernel_space, rounded, &p, &error) != EDGERT_OK)
        build_fail(EDGERT_ERR_OUT_OF_MEMORY, "tactic timing: cannot allocate %zu bytes of device memory: %s", bytes,
                   error.message);
      data.reset(p);
      return;
    }
    data.reset(std::aligned_alloc(64, rounded));
    if (!data) build_fail(EDGERT_ERR_OUT_OF_MEMORY, "tactic timing: cannot allocate %zu bytes", bytes);
    std::memset(data.get(), 0, rounded);
  }
};

size_t tensor_bytes(const edgert_tensor& t) {
  size_t n = edgert_dtype_size(t.dtype);
  for (int32_t d = 0; d < t.rank; ++d) n *= static_cast<size_t>(std::max<int64_t>(t.dims[d], 0));
  return n;
}

// Seeded values for non-constant inputs: small floats (no overflow, no denormals), zeros for
// every other dtype (valid indices for Gather-like ops).
void fill_random(const edgert_tensor& t, void* data, std::mt19937& rng) {
  size_t count = edgert_dtype_size(t.dtype) ? tensor_bytes(t) / edgert_dtype_size(t.dtype) : 0;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  if (t.dtype == EDGERT_DTYPE_FLOAT32) {
    float* p = static_cast<float*>(data);
    for (size_t i = 0; i < count; ++i) p[i] = uniform(rng);
  } else if (t.dtype == EDGERT_DTYPE_FLOAT16) {
    uint16_t* p = static_cast<uint16_t*>(data);
    for (size_t i = 0; i < count; ++i) p[i] = edgert_float_to_half(uniform(rng));
  } else if (t.dtype == EDGERT_DTYPE_FLOAT64) {
    double* p = static_cast<double*>(data);
    for (size_t i = 0; i < count; ++i) p[i] = uniform(rng);
  }
}

// Why a node could not be timed, or empty when timing produced a winner.
struct TimingOutcome {
  std::vector<TacticTiming> timings;
  std::string untimed_reason;
};

// One candidate, prepared: its kernel state, outputs and workspace live until the timer ends,
// so candidates can take turns.
struct Trial {
  int64_t id = 0;
  std::string name;
  const edgert_kernel* kernel = nullptr;
  void* state = nullptr;
  std::vector<edgert_tensor> outputs;
  std::vector<AlignedBuffer> output_storage;
  std::unique_ptr<AlignedBuffer> workspace;
  std::vector<double> runs;
  double first_ms = -1;  // the warm-up (the faster of two when it got a second look)
  bool failed = false, cut_short = false;
  // A capturable device kernel is timed as a CUDA graph of several runs (see
  // TacticTimer::execute_timed); graph_tried: capture was attempted (graph stays null if it failed).
  const edgert_device* device = nullptr;
  void* graph = nullptr;
  bool graph_tried = false;

  Trial() = default;
  Trial(const Trial&) = delete;
  Trial& operator=(const Trial&) = delete;
  ~Trial() { release(); }
  // Frees the kernel state and the buffers; the timings stay.
  void release() {
    if (graph) device->graph_free(graph);
    graph = nullptr;
    if (state) kernel->release(kernel, state);
    state = nullptr;
    output_storage.clear();
    workspace.reset();
  }
};

class TacticTimer {
 public:
  // spin_ms: untimed work before the first timing (spin_up), for a build's first timed node.
  // A device kernel (its plugin has a device) runs on device memory on a stream of its own,
  // timed on the device between two timers.
  TacticTimer(const TunerOptions& options, const Graph& graph, const Node& node, const edgert_kernel& kernel,
              const edgert_device* device, double spin_ms)
      : options_(options), view_(graph, node), node_(node), kernel_(kernel), device_(device), spin_ms_(spin_ms) {
    if (!device_) return;
    edgert_error error{};
    if (device_->stream_create(&stream_, &error) != EDGERT_OK || device_->timer_create(&start_, &error) != EDGERT_OK ||
        device_->timer_create(&end_, &error) != EDGERT_OK)
      build_fail(error.status, "tactic timing on the device: %s", error.message);
  }
  ~TacticTimer() {
    if (!device_) return;
    edgert_error ignored{};
    device_->synchronize(stream_, &ignored);
    storage_.clear();
    if (start_) device_->timer_free(start_);
    if (end_) device_->timer_free(end_);
    device_->stream_destroy(stream_);
  }
  TacticTimer(const TacticTimer&) = delete;
  TacticTimer& operator=(const TacticTimer&) = delete;

  // Every candidate is prepared first; after its warm-up, the candidates take turns, one run
  // each per round, and each keeps the median of its runs. A burst of other load on a shared
  // machine, or a slow spell of the cores, then falls on all of them alike: timed one after
  // the other, whichever candidate met it lost (a kernel measured at 3.6x its steady time lost
  // to one 1.6x slower). A node whose weights are so large that every candidate's packed copy
  // at once would not fit options.together_bytes is timed one candidate after the other.
  TimingOutcome run(const std::vector<edgert_tactic>& candidates) {
    TimingOutcome outcome;
    std::mt19937 rng(2026);
    inputs_.assign(view_.inputs(), view_.inputs() + node_.inputs.size());
    size_t constant_bytes = 0;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      edgert_tensor& t = inputs_[i];
      if (t.data) constant_bytes += tensor_bytes(t);
      if (t.dtype == EDGERT_DTYPE_UNDEFINED) continue;  // an omitted input
      // A device kernel reads its operands on the device, except those it reads on the host.
      const bool on_device = device_ && !(i < 64 && (kernel_.host_inputs >> i) & 1u);
      if (t.data && !on_device) continue;  // a constant
      if (edgert_dtype_size(t.dtype) == 0) {
        outcome.untimed_reason = std::string("an input of dtype ") + edgert_dtype_name(t.dtype) + " cannot be made up";
        return outcome;
      }
      AlignedBuffer host(tensor_bytes(t));
      if (t.data) std::memcpy(host.data.get(), t.data, tensor_bytes(t));
      else fill_random(t, host.data.get(), rng);
      if (!on_device) {
        storage_.push_back(std::move(host));
        t.data = storage_.back().data.get();
        continue;
      }
      storage_.emplace_back(tensor_bytes(t), device_);
      edgert_error error{};
      if (device_->copy(storage_.back().data.get(), device_->kernel_space, host.data.get(), EDGERT_MEMORY_HOST,
                        tensor_bytes(t), stream_, &error) != EDGERT_OK ||
          device_->synchronize(stream_, &error) != EDGERT_OK)
        build_fail(error.status, "tactic timing: copying an input of node '%s' to the device: %s", node_.name.c_str(),
                   error.message);
      t.data = storage_.back().data.get();
    }
    if (device_) make_cold_copies();
    const bool together = constant_bytes * 2 * candidates.size() < options_.together_bytes;
    std::vector<std::unique_ptr<Trial>> trials;
    for (const edgert_tactic& c : candidates) {
      trials.push_back(std::make_unique<Trial>());
      trials.back()->id = c.id;
      trials.back()->name = c.name ? c.name : "";
    }
    double best = -1;
    bool spun = spin_ms_ <= 0;
    if (together) {
      for (std::unique_ptr<Trial>& t : trials)
        if (!prepare(*t, &outcome.untimed_reason)) return outcome;
      for (std::unique_ptr<Trial>& t : trials) spun = spun || spin_up(*t, spin_ms_);
      std::vector<Trial*> contenders;
      for (std::unique_ptr<Trial>& t : trials)
        if (warm_up(*t, &best)) contenders.push_back(t.get());
      take_turns(contenders);
    } else {
      for (std::unique_ptr<Trial>& t : trials) {
        if (!prepare(*t, &outcome.untimed_reason)) return outcome;
        spun = spun || spin_up(*t, spin_ms_);
        std::vector<Trial*> alone;
        if (warm_up(*t, &best)) alone.push_back(t.get());
        take_turns(alone);
        t->release();
      }
    }
    for (std::unique_ptr<Trial>& t : trials) {
      TacticTiming timing{t->id, t->name, -1, 0};
      if (t->failed) {
        // stays failed: median < 0
      } else if (t->cut_short || t->runs.empty()) {
        timing.median_ms = t->first_ms;
        timing.runs = 1;
      } else {
        std::vector<double>& runs = t->runs;
        std::sort(runs.begin(), runs.end());
        const size_t n = runs.size();
        timing.median_ms = n % 2 ? runs[n / 2] : (runs[n / 2 - 1] + runs[n / 2]) / 2;
        timing.runs = static_cast<int32_t>(n);
      }
      outcome.timings.push_back(std::move(timing));
    }
    bool any = false;
    for (const TacticTiming& t : outcome.timings) any = any || t.median_ms >= 0;
    if (!any) {
      outcome.timings.clear();
      outcome.untimed_reason = "no tactic ran";
    }
    return outcome;
  }

 private:
  // False when the node cannot be timed at all (then `why` says why); a tactic that cannot run
  // the node is marked failed.
  bool prepare(Trial& trial, std::string* why) {
    trial.kernel = &kernel_;
    trial.outputs.assign(node_.outputs.size(), edgert_tensor{});
    edgert_prepare_info info{};
    edgert_error error{};
    const edgert_status status = kernel_.prepare(&kernel_, view_.node(), trial.id, inputs_.data(),
                                                 trial.outputs.data(), &trial.state, &info, &error);
    if (status == EDGERT_ERR_NEEDS_DATA) {
      *why = "output shapes depend on input values";
      return false;
    }
    if (status != EDGERT_OK) {
      trial.failed = true;
      return true;
    }
    if (info.data_dependent) {
      *why = "the kernel reports data-dependent outputs";
      return false;
    }
    for (edgert_tensor& t : trial.outputs) {
      trial.output_storage.emplace_back(tensor_bytes(t), device_);
      t.data = trial.output_storage.back().data.get();
    }
    trial.workspace = std::make_unique<AlignedBuffer>(info.workspace_bytes, device_);
    return true;
  }

  // One run's time (wall time on the host, device time between timers on a device); marks the
  // trial failed when the kernel reports an error.
  double execute_timed(Trial& trial) {
    edgert_error e{};
    if (device_) {
      // Engines replay their device kernels as CUDA graphs, where a library's host-side cost per
      // call (cuDNN's is tens of microseconds) is gone. Timed one call at a time, the device
      // would idle through it and a cheap launch would beat a faster kernel: a capturable
      // kernel is timed as a graph of several runs, as the engine will run it.
      if (!trial.graph_tried) capture(trial);
      float ms = 0;
      edgert_status status = device_->timer_record(start_, stream_, &e);
      if (status == EDGERT_OK)
        status = trial.graph ? device_->graph_launch(trial.graph, stream_, &e)
                             : kernel_.execute(&kernel_, trial.state, view_.node(), inputs_.data(),
                                               trial.outputs.data(), trial.workspace->data.get(), stream_, &e);
      if (status == EDGERT_OK) status = device_->timer_record(end_, stream_, &e);
      if (status == EDGERT_OK) status = device_->timer_elapsed(start_, end_, &ms, &e);
      if (status != EDGERT_OK) {
        trial.failed = true;
        edgert_error ignored{};
        device_->synchronize(stream_, &ignored);
      }
      return trial.graph ? ms / graph_repeats() : ms;
    }
    const Clock::time_point start = Clock::now();
    const edgert_status status = kernel_.execute(&kernel_, trial.state, view_.node(), inputs_.data(),
                                                 trial.outputs.data(), trial.workspace->data.get(), nullptr, &e);
    const double ms = elapsed_ms(start);
    if (status != EDGERT_OK) trial.failed = true;
    return ms;
  }

  // Copies of the node's device constants for the graph's runs to take turns over (see
  // kColdBytes): rotations_[r] is the inputs of run r.
  void make_cold_copies() {
    rotations_.assign(1, inputs_);
    size_t bytes = 0;
    std::vector<size_t> constants;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const bool on_device = !(i < 64 && (kernel_.host_inputs >> i) & 1u);
      if (view_.inputs()[i].data && on_device && inputs_[i].dtype != EDGERT_DTYPE_UNDEFINED) {
        constants.push_back(i);
        bytes += tensor_bytes(inputs_[i]);
      }
    }
    if (constants.empty() || bytes == 0) return;
    const int copies = static_cast<int>(std::min<size_t>(kMaxCopies, (kColdBytes + bytes - 1) / bytes));
    for (int c = 1; c < copies; ++c) {
      std::vector<edgert_tensor> run = inputs_;
      for (size_t i : constants) {
        storage_.emplace_back(tensor_bytes(inputs_[i]), device_);
        edgert_error error{};
        if (device_->copy(storage_.back().data.get(), device_->kernel_space, view_.inputs()[i].data, EDGERT_MEMORY_HOST,
                          tensor_bytes(inputs_[i]), stream_, &error) != EDGERT_OK)
          build_fail(error.status, "tactic timing: copying a constant of node '%s' to the device: %s",
                     node_.name.c_str(), error.message);
        run[i].data = storage_.back().data.get();
      }
      rotations_.push_back(std::move(run));
    }
    edgert_error error{};
    if (device_->synchronize(stream_, &error) != EDGERT_OK)
      build_fail(error.status, "tactic timing: copying the constants of node '%s': %s", node_.name.c_str(), error.message);
  }

  int graph_repeats() const { return std::max<int>(kGraphRepeats, static_cast<int>(rotations_.size())); }

  // Captures graph_repeats() runs of a capturable device kernel into trial.graph, taking turns
  // over the copies of its constants; leaves it null (timed call by call) when the kernel or the
  // device cannot be captured.
  void capture(Trial& trial) {
    trial.graph_tried = true;
    if (trial.failed || !(kernel_.flags & EDGERT_KERNEL_CAPTURABLE) || !device_->graph_begin) return;
    edgert_error e{};
    if (device_->graph_begin(stream_, &e) != EDGERT_OK) return;
    edgert_status status = EDGERT_OK;
    for (int r = 0; r < graph_repeats() && status == EDGERT_OK; ++r)
      status = kernel_.execute(&kernel_, trial.state, view_.node(),
                               rotations_.empty() ? inputs_.data() : rotations_[r % rotations_.size()].data(),
                               trial.outputs.data(),
                               trial.workspace->data.get(), stream_, &e);
    void* graph = nullptr;
    edgert_error end_error{};
    const edgert_status ended = device_->graph_end(stream_, &graph, &end_error);
    if (status == EDGERT_OK && ended == EDGERT_OK && graph) {
      trial.device = device_;
      trial.graph = graph;
    } else if (graph) {
      device_->graph_free(graph);
    }
  }

  // An idle machine's cores run slowly for the first milliseconds of work (clock ramp-up,
  // power-gated vector units): without this, the first tactic a build timed measured up to 4x
  // its steady time. Untimed runs of `trial` for `ms`; false when it cannot run.
  bool spin_up(Trial& trial, double ms) {
    if (trial.failed) return false;
    const Clock::time_point start = Clock::now();
    while (!trial.failed && elapsed_ms(start) < ms) execute_timed(trial);
    return !trial.failed;
  }

  // The warm-up run; false when the trial is out (failed, or cut short). A tactic far behind
  // the best warm-up so far is not measured further; one moderately behind gets a second look,
  // since a preempted warm-up must not hide the winner.
  bool warm_up(Trial& t, double* best) {
    if (t.failed) return false;
    t.first_ms = execute_timed(t);
    if (t.failed) return false;
    const double factor = options_.prune_factor;
    if (*best >= 0 && t.first_ms > factor * *best && t.first_ms <= 10 * factor * *best) {
      const double again = execute_timed(t);
      if (t.failed) return false;
      t.first_ms = std::min(t.first_ms, again);
    }
    if (*best >= 0 && t.first_ms > factor * *best) {
      t.cut_short = true;
      return false;
    }
    if (*best < 0 || t.first_ms < *best) *best = t.first_ms;
    return true;
  }

  // Rounds, one run of each contender per round, until every contender has min_runs and
  // target_ms of runs, or max_runs, or the time budget (budget_ms per contender) is spent.
  void take_turns(const std::vector<Trial*>& contenders) {
    const Clock::time_point start = Clock::now();
    const double budget = options_.budget_ms * static_cast<double>(contenders.size());
    for (int32_t round = 0; round < options_.max_runs && !contenders.empty(); ++round) {
      bool enough = true;
      for (Trial* t : contenders) {
        if (t->failed) continue;
        t->runs.push_back(execute_timed(*t));
        double total = 0;
        for (double ms : t->runs) total += ms;
        enough = enough && static_cast<int32_t>(t->runs.size()) >= options_.min_runs && total >= options_.target_ms;
      }
      if (enough || elapsed_ms(start) >= budget) break;
    }
  }

  const TunerOptions& options_;
  NodeView view_;
  const Node& node_;
  const edgert_kernel& kernel_;
  const edgert_device* device_;
  const double spin_ms_;
  void* stream_ = nullptr;
  void* start_ = nullptr;
  void* end_ = nullptr;
  std::vector<edgert_tensor> inputs_;
  std::vector<std::vector<edgert_tensor>> rotations_;  // the inputs of each graph run (make_cold_copies)
  std::vector<AlignedBuffer> storage_;
};

std::vector<edgert_tactic> list_tactics(const Graph& graph, const Node& node, const LoadedPlugin& plugin,
                                        const edgert_kernel& kernel) {
  NodeView view(graph, node);
  std::vector<edgert_tactic> tactics(16);
  int32_t n = kernel.tactics(&kernel, view.node(), view.inputs(), tactics.data(), static_cast<int32_t>(tactics.size()));
  if (n > static_cast<int32_t>(tactics.size())) {
    tactics.resize(static_cast<size_t>(n));
    n = kernel.tactics(&kernel, view.node(), view.inputs(), tactics.data(), n);
  }
  if (n <= 0)
    build_fail(EDGERT_ERR_PLUGIN, "kernel %s/%s lists no tactics for node '%s' (%s); a kernel with a tactics "
               "function must list at least one", plugin.name.c_str(), kernel.name, node.name.c_str(),
               node.op_type.c_str());
  tactics.resize(std::min<size_t>(static_cast<size_t>(n), tactics.size()));
  return tactics;
}

std::string timings_text(const std::vector<TacticTiming>& timings) {
  std::string s;
  for (const TacticTiming& t : timings) {
    s += (s.empty() ? "" : ", ") + t.name + " (" + std::to_string(t.id) + ") ";
    if (t.median_ms < 0) s += "failed";
    else s += format_ms(t.median_ms) + (t.runs == 1 ? " (1 run, cut short)" : " (" + std::to_string(t.runs) + " runs)");
  }
  return s;
}

}  // namespace

std::vector<std::string> tactic_isa_requirements(const std::string& tactic_name) {
  size_t dash = tactic_name.rfind('-');
  std::string isa = dash == std::string::npos ? tactic_name : tactic_name.substr(dash + 1);
  if (isa == "avx512") return {"avx512f"};
  if (isa.rfind("avx512", 0) == 0) return {"avx512f", isa};  // avx512bw, avx512vnni, ...
  if (isa == "avx2") return {"avx2", "fma"};  // x86-64-v3 kernels use FMA with AVX2
  if (isa == "avx" || isa == "fma" || isa == "f16c" || isa == "neon" || isa == "asimd" || isa == "dotprod" ||
      isa == "asimdhp" || isa == "fp16")
    return {isa};
  return {};
}

std::string op_signature(const Graph& graph, const Node& node) {
  std::string s = "op=" + (node.domain.empty() ? std::string() : node.domain + ".") + node.op_type +
                  " opset=" + std::to_string(node.opset) + " inputs=(";
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    s += i ? "," : "";
    if (node.inputs[i] < 0) {
      s += "none";
      continue;
    }
    const Value& v = graph.values[node.inputs[i]];
    s += tensor_signature(v) + (v.is_constant() ? "const" : "");
  }
  s += ") outputs=" + std::to_string(node.outputs.size()) + " attrs={";
  std::vector<const Attribute*> attributes;
  for (const Attribute& a : node.attributes) attributes.push_back(&a);
  std::sort(attributes.begin(), attributes.end(), [](const Attribute* a, const Attribute* b) { return a->name < b->name; });
  for (size_t k = 0; k < attributes.size(); ++k) {
    const Attribute& a = *attributes[k];
    s += (k ? ";" : "") + a.name + "=";
    switch (a.type) {
      case EDGERT_ATTR_INT: s += std::to_string(a.i); break;
      case EDGERT_ATTR_FLOAT: s += format_float(a.f); break;
      case EDGERT_ATTR_STRING: s += "s" + std::to_string(a.s.size()) + ":" + a.s; break;
      case EDGERT_ATTR_INTS:
        s += "[";
        for (size_t i = 0; i < a.ints.size(); ++i) s += (i ? "," : "") + std::to_string(a.ints[i]);
        s += "]";
        break;
      case EDGERT_ATTR_FLOATS:
        s += "[";
        for (size_t i = 0; i < a.floats.size(); ++i) s += (i ? "," : "") + format_float(a.floats[i]);
        s += "]";
        break;
      case EDGERT_ATTR_STRINGS:
        s += "[";
        for (size_t i = 0; i < a.strings.size(); ++i)
          s += (i ? "," : "") + std::string("s") + std::to_string(a.strings[i].size()) + ":" + a.strings[i];
        s += "]";
        break;
      case EDGERT_ATTR_TENSOR:
        s += "tensor:" + (a.tensor >= 0 ? tensor_signature(graph.values[a.tensor]) : std::string("?"));
        break;
      case EDGERT_ATTR_GRAPH: s += "graph:" + std::to_string(a.graph); break;
      default: s += "?"; break;
    }
  }
  return s + "}";
}

TacticTuner::TacticTuner(TunerOptions options) : options_(std::move(options)) {
  if (!options_.cache) build_fail(EDGERT_ERR_INTERNAL, "TacticTuner needs a TimingCache");
}

void TacticTuner::choose(const Graph& graph, Node& node, const LoadedPlugin& plugin, const edgert_kernel& kernel) {
  node.tactic = 0;
  node.tactic_name.clear();
  if (!kernel.tactics) return;
  std::vector<edgert_tactic> listed = list_tactics(graph, node, plugin, kernel);
  std::vector<edgert_tactic> candidates;
  std::string excluded;
  for (const edgert_tactic& t : listed) {
    std::string missing;
    for (const std::string& feature : tactic_isa_requirements(t.name ? t.name : ""))
      if (std::find(options_.board_cpu_features.begin(), options_.board_cpu_features.end(), feature) ==
          options_.board_cpu_features.end())
        missing = feature;
    if (missing.empty()) candidates.push_back(t);
    else excluded += (excluded.empty() ? "" : ", ") + std::string(t.name) + " (board lacks " + missing + ")";
  }
  // Kernels list a portable reference last; a list with nothing the board runs keeps the first.
  if (candidates.empty()) candidates.push_back(listed.front());
  auto take = [&](int64_t id, const std::string& name) {
    node.tactic = id;
    node.tactic_name = name;
  };
  const edgert_tactic& first = candidates.front();
  take(first.id, first.name ? first.name : "");
  if (listed.size() == 1) return;

  ++stats_.nodes;
  auto log = [&](const std::string& line) {
    if (options_.log) options_.log("  tactics of '" + node.name + "' (" + plugin.name + "/" + kernel.name + "): " + line);
  };
  if (!excluded.empty()) log("not for this board: " + excluded);
  if (candidates.size() == 1) {
    ++stats_.first_listed;
    log("only " + node.tactic_name + " is left, not timed");
    return;
  }
  if (options_.policy == TacticPolicy::kFirst) {
    ++stats_.first_listed;
    log("first-listed " + node.tactic_name + " (--tactics first)");
    return;
  }
  NodeView view(graph, node);
  if (!view.inputs_static()) {
    ++stats_.first_listed;
    log("first-listed " + node.tactic_name + ": input shapes are not static, not timed");
    return;
  }

  // A device kernel's speed is the device's and its libraries': they are part of the plugin's
  // version in the key (the GPU's name, SM, driver, cuDNN and cuBLASLt versions).
  const edgert_device* device = plugin.table->device;
  std::string version = plugin.table->version ? plugin.table->version : "";
  if (device) version += std::string(" on ") + device->describe();
  TimingKey key{options_.board_fingerprint, plugin.name, version, kernel.name, op_signature(graph, node),
                device ? 0 : options_.threads};
  if (std::optional<TimingRecord> record = options_.cache->find(key)) {
    bool offered = false;
    for (const edgert_tactic& c : candidates) offered = offered || c.id == record->chosen;
    // Built elsewhere the list here says nothing about the board's; here a record naming a
    // tactic the kernel no longer offers is stale.
    if (offered || !options_.time_here) {
      ++stats_.hits;
      take(record->chosen, record->chosen_name);
      log("cache hit -> " + node.tactic_name + " (" + std::to_string(node.tactic) + "); recorded " +
          timings_text(record->timings));
      return;
    }
    log("cache record names tactic " + std::to_string(record->chosen) + ", which the kernel no longer lists: timing again");
  }
  ++stats_.misses;
  if (!options_.time_here) {
    ++stats_.first_listed;
    log("cache miss; board is not this machine, not timed -> first-listed " + node.tactic_name);
    return;
  }

  Clock::time_point start = Clock::now();
  TimingOutcome outcome =
      TacticTimer(options_, graph, node, kernel, plugin.table->device, stats_.timed == 0 ? options_.spin_up_ms : 0)
          .run(candidates);
  stats_.timing_seconds += elapsed_ms(start) / 1000;
  if (!outcome.untimed_reason.empty()) {
    ++stats_.first_listed;
    log("cache miss; not timed (" + outcome.untimed_reason + ") -> first-listed " + node.tactic_name);
    return;
  }
  ++stats_.timed;
  // Within the margin, the earlier listed wins: the kernel's own ranking breaks what is
  // measurement noise, so rebuilds without a cache do not flip between equal tactics.
  const TacticTiming* best = nullptr;
  for (const TacticTiming& t : outcome.timings)
    if (t.median_ms >= 0 && (!best || t.median_ms < best->median_ms * (1 - options_.tie_margin))) best = &t;
  take(best->id, best->name);
  log("cache miss; timed " + timings_text(outcome.timings) + " -> " + node.tactic_name);
  options_.cache->put(key, TimingRecord{best->id, best->name, outcome.timings});
}

}  // namespace edgert::builder

#include "engine_handle.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>

#include "edgert/dtype_info.h"
#include "engine_file.h"
#include "error.h"
#include "plugin_loader.h"
#include <sys/stat.h>
#include <cmath>

namespace edgert::daemon {

namespace {
std::atomic<bool> g_device_memory_is_host{true};
}  // namespace

void set_device_memory_is_host(bool is_host) { g_device_memory_is_host = is_host; }

uint64_t EngineFootprint::total() const {
  return file_bytes - std::min(unread_weight_bytes, file_bytes) + activation_bytes + kernel_state_bytes +
         (g_device_memory_is_host ? device_bytes : 0);
}

std::string device_memory_refusal(const EngineFootprint& footprint, const std::string& plugin_path,
                                  const std::string& what) {
  if (g_device_memory_is_host || footprint.device_bytes == 0) return "";
  uint64_t free_bytes = 0, total_bytes = 0;
  edgert_error error{};
  if (edgert_device_memory_info(plugin_path.empty() ? nullptr : plugin_path.c_str(), "cuda", &free_bytes, &total_bytes,
                                &error) != EDGERT_OK)
    return "";  // no GPU to ask: the load itself says what is missing
  if (footprint.device_bytes <= free_bytes) return "";
  auto mib = [](uint64_t b) { return std::to_string((b + (1u << 20) - 1) >> 20); };
  return what + " needs " + mib(footprint.device_bytes) + " MiB of GPU memory and " + mib(free_bytes) + " MiB of " +
         mib(total_bytes) + " MiB are free";
}

EngineFootprint read_engine_footprint(const std::string& path) {
  EngineFile file;
  edgert_error error{};
  if (!file.open(path, &error)) throw std::runtime_error(error.message);
  EngineFootprint f;
  f.file_bytes = file.size();
  const fb::Engine* e = file.engine();
  f.unread_weight_bytes = e->unread_weight_bytes();
  const fb::Graph* main = e->graphs()->Get(0);
  // The builder's memory plan: one arena, one workspace, plus whatever it left unplanned
  // (inputs, dynamic or data-dependent tensors), counted as every such tensor alive at once.
  const fb::MemoryPlan* plan = e->memory_plans() && e->memory_plans()->size() ? e->memory_plans()->Get(0) : nullptr;
  if (plan) f.activation_bytes = plan->arena_bytes() + plan->workspace_bytes() + plan->unified_arena_bytes();
  if (plan) f.kernel_state_bytes = plan->kernel_state_bytes();
  if (plan) f.device_bytes = plan->device_arena_bytes() + plan->device_workspace_bytes();
  // Constants the device kernels read are uploaded once: a node writing DEVICE tensors is one.
  if (main->nodes() && main->tensors()) {
    std::vector<bool> counted(main->tensors()->size(), false);
    for (const fb::Node* node : *main->nodes()) {
      bool device = false;
      if (node->outputs())
        for (int32_t t : *node->outputs())
          device = device || (t >= 0 && static_cast<uint32_t>(t) < main->tensors()->size() &&
                              main->tensors()->Get(t)->memory_space() == EDGERT_MEMORY_DEVICE);
      if (!device || !node->inputs()) continue;
      for (int32_t t : *node->inputs()) {
        if (t < 0 || static_cast<uint32_t>(t) >= counted.size() || counted[t]) continue;
        const fb::Tensor* tensor = main->tensors()->Get(t);
        if (tensor->weight() < 0 || !tensor->shape()) continue;
        counted[t] = true;
        uint64_t bytes = edgert::dtype_size(tensor->dtype() ? tensor->dtype() : EDGERT_DTYPE_FLOAT32);
        for (const fb::Dim* d : *tensor->shape()) bytes *= static_cast<uint64_t>(std::max<int64_t>(d->value(), 0));
        f.device_bytes += bytes;
      }
    }
  }
  // Sized at the optimization profile's maximum where a dimension is dynamic.
  std::map<std::string, std::vector<int64_t>> max_shapes;
  if (e->profiles() && e->profiles()->size() && e->profiles()->Get(0)->inputs())
    for (const fb::ShapeRange* r : *e->profiles()->Get(0)->inputs())
      max_shapes[r->input()->str()] = std::vector<int64_t>(r->max()->begin(), r->max()->end());
  int64_t scale = 1;
  for (const auto& [name, dims] : max_shapes)
    for (int64_t d : dims) scale = std::max<int64_t>(scale, d);
  if (main->tensors())
    for (uint32_t i = 0; i < main->tensors()->size(); ++i) {
      const fb::Tensor* t = main->tensors()->Get(i);
      if (t->weight() >= 0 || !t->rank_known() || !t->shape()) continue;
      if (plan && plan->offsets() && i < plan->offsets()->size() && plan->offsets()->Get(i) >= 0) continue;
      uint64_t bytes = edgert::dtype_size(t->dtype() ? t->dtype() : EDGERT_DTYPE_FLOAT32);
      for (const fb::Dim* d : *t->shape()) bytes *= static_cast<uint64_t>(d->value() >= 0 ? d->value() : scale);
      (t->memory_space() == EDGERT_MEMORY_DEVICE ? f.device_bytes : f.activation_bytes) += bytes;
    }
  return f;
}

EngineFacts read_engine_facts(const std::string& path, const std::vector<signing::PublicKey>& trusted) {
  EngineFacts facts;
  facts.footprint = read_engine_footprint(path);
  EngineFile file;
  edgert_error error{};
  if (!file.open(path, &error)) throw std::runtime_error(error.message);
  const fb::Engine* e = file.engine();
  if (e->board()) {
    facts.board = e->board()->name() ? e->board()->name()->str() : "";
    facts.fingerprint = e->board()->fingerprint() ? e->board()->fingerprint()->str() : "";
  }
  if (e->plugins())
    for (const fb::PluginRef* p : *e->plugins())
      if (p->name()) facts.plugins.push_back(p->name()->str());
  facts.has_self_test = e->self_test() && e->self_test()->inputs() && e->self_test()->outputs();
  facts.signature = signing::check_engine_signature(file.bytes(), file.size(), trusted);
  return facts;
}

std::vector<std::string> missing_plugins(const std::vector<std::string>& plugins, const std::string& plugin_path) {
  std::vector<std::string> dirs = plugin_search_path(plugin_path.empty() ? nullptr : plugin_path.c_str());
  std::vector<std::string> missing;
  for (const std::string& name : plugins) {
    if (name == "builtin" || name.empty()) continue;
    bool found = false;
    for (const std::string& d : dirs) {
      struct stat st {};
      if (stat((d + "/" + plugin_file_name(name)).c_str(), &st) == 0) found = true;
    }
    if (!found) missing.push_back(name);
  }
  return missing;
}

EngineHandle::EngineHandle(const std::string& path, const std::string& plugin_path, const std::string& board,
                           bool mlock_weights, const std::string& id, const GpuScheduling& gpu)
    : path_(path), id_(id.empty() ? signing::sha256_file(path) : id) {
  footprint_ = read_engine_footprint(path);
  edgert_load_options options;
  edgert_load_options_init(&options);
  options.plugin_path = plugin_path.empty() ? nullptr : plugin_path.c_str();
  options.expected_board = board.empty() ? nullptr : board.c_str();
  edgert_error error{};
  if (edgert_engine_load(path.c_str(), &options, &engine_, &error) != EDGERT_OK) throw std::runtime_error(error.message);
  if (edgert_context_create(engine_, &context_, &error) != EDGERT_OK) {
    edgert_engine_release(engine_);
    throw std::runtime_error(error.message);
  }
  if (edgert_engine_num_inputs(engine_) != 1) {
    edgert_context_release(context_);
    edgert_engine_release(engine_);
    throw std::runtime_error("engine '" + path + "' has " + std::to_string(edgert_engine_num_inputs(engine_)) +
                             " inputs; a camera pipeline needs exactly one image input");
  }
  if (edgert_context_set_priority(context_, gpu.priority, &error) != EDGERT_OK ||
      edgert_context_set_gpu_share(context_, gpu.gpu_share, &error) != EDGERT_OK) {
    edgert_context_release(context_);
    edgert_engine_release(engine_);
    throw std::runtime_error(error.message);
  }
  // GPU time per frame for status and results: two timer records a run.
  edgert_context_set_device_timing(context_, 1);
  edgert_engine_input_info(engine_, 0, &input_);
  for (int32_t i = 0; i < edgert_engine_num_outputs(engine_); ++i) {
    edgert_tensor_info info{};
    edgert_engine_output_info(engine_, i, &info);
    output_names_.push_back(info.name);
  }
  outputs_.resize(output_names_.size());
  if (mlock_weights) lock_mapping_in_ram();
}

// The runtime maps the engine file privately; pinning that mapping keeps swap (zram on small
// boards) away from the weights every frame reads. Found through /proc/self/maps because the
// C API does not expose the mapping's address. The file's unread weights (its end, before the
// trailer) stay unlocked: locking faults pages in, and no kernel reads those.
void EngineHandle::lock_mapping_in_ram() {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t read_end =
      (footprint_.file_bytes - std::min(footprint_.unread_weight_bytes, footprint_.file_bytes) + page - 1) / page * page;
  char resolved[PATH_MAX];
  if (!realpath(path_.c_str(), resolved)) return;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < strlen(resolved) || line.compare(line.size() - strlen(resolved), std::string::npos, resolved) != 0)
      continue;
    unsigned long start = 0, end = 0, offset = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %*s %lx", &start, &end, &offset) != 3) continue;
    if (offset >= read_end) continue;
    end = std::min<unsigned long>(end, start + (read_end - offset));
    if (mlock(reinterpret_cast<void*>(start), end - start) != 0)
      throw std::runtime_error("cannot lock engine '" + path_ + "' in RAM (mlock): " + strerror(errno) +
                               "; raise LimitMEMLOCK= or set mlock_weights: false");
    locked_bytes_ += end - start;
  }
}

EngineHandle::~EngineHandle() {
  if (context_) edgert_context_release(context_);
  for (void* buffer : output_buffers_) edgert_engine_free(engine_, EDGERT_MEMORY_UNIFIED, buffer);
  if (engine_) edgert_engine_release(engine_);
}

std::string EngineHandle::replay_self_test(int runs, bool* had_vector) {
  EngineFile file;
  edgert_error error{};
  if (!file.open(path_, &error)) return error.message;
  const fb::SelfTest* test = file.engine()->self_test();
  *had_vector = test && test->inputs() && test->outputs();
  if (!*had_vector) return "";
  std::vector<edgert_tensor> inputs;
  std::vector<std::vector<float>> storage;  // the runtime may want aligned, writable buffers
  for (const fb::SelfTestTensor* t : *test->inputs()) {
    if (!t->shape() || !t->data() || t->shape()->size() > EDGERT_MAX_RANK) return "self-test input is malformed";
    storage.emplace_back(t->data()->begin(), t->data()->end());
    edgert_tensor in{};
    in.dtype = EDGERT_DTYPE_FLOAT32;
    in.rank = static_cast<int32_t>(t->shape()->size());
    for (uint32_t d = 0; d < t->shape()->size(); ++d) in.dims[d] = t->shape()->Get(d);
    in.data = storage.back().data();
    inputs.push_back(in);
  }
  for (int i = 0; i < runs; ++i)
    if (edgert_context_run(context_, inputs.data(), static_cast<int32_t>(inputs.size()), &error) != EDGERT_OK)
      return std::string("self-test run failed: ") + error.message;
  if (static_cast<int32_t>(test->outputs()->size()) != edgert_engine_num_outputs(engine_))
    return "self-test stores " + std::to_string(test->outputs()->size()) + " outputs, the engine has " +
           std::to_string(edgert_engine_num_outputs(engine_));
  for (uint32_t o = 0; o < test->outputs()->size(); ++o) {
    const fb::SelfTestTensor* want = test->outputs()->Get(o);
    edgert_tensor got{};
    edgert_context_output(context_, static_cast<int32_t>(o), &got);
    size_t count = 1;
    for (int32_t d = 0; d < got.rank; ++d) count *= static_cast<size_t>(got.dims[d]);
    std::string name = want->name() ? want->name()->str() : std::to_string(o);
    if (got.dtype != EDGERT_DTYPE_FLOAT32 || !want->data() || count != want->data()->size())
      return "self-test output '" + name + "' has " + std::to_string(count) + " values, expected " +
             std::to_string(want->data() ? want->data()->size() : 0);
    const float* g = static_cast<const float*>(got.data);
    size_t bad = 0, worst = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < count; ++i) {
      double expected = want->data()->Get(static_cast<uint32_t>(i));
      double diff = std::fabs(g[i] - expected);
      double allowed = test->atol() + test->rtol() * std::fabs(expected);
      if (!(diff <= allowed)) {
        ++bad;
        if (diff - allowed > worst_excess) {
          worst_excess = diff - allowed;
          worst = i;
        }
      }
    }
    if (bad) {
      char message[512];
      std::snprintf(message, sizeof message,
                    "self-test failed: output '%s' differs in %zu of %zu values (worst at %zu: got %g, expected %g; "
                    "rtol %g, atol %g): the kernels here do not compute what they computed at build time",
                    name.c_str(), bad, count, worst, g[worst], want->data()->Get(static_cast<uint32_t>(worst)),
                    test->rtol(), test->atol());
      return message;
    }
  }
  return "";
}

bool EngineHandle::can_run_in_place() {
  if (in_place_checked_) return in_place_;
  in_place_checked_ = true;
  edgert_error error{};
  std::vector<std::pair<void*, size_t>> buffers;
  bool fits = true;
  for (int32_t i = 0; fits && i < static_cast<int32_t>(output_names_.size()); ++i) {
    edgert_tensor_info info{};
    edgert_engine_output_info(engine_, i, &info);
    size_t bytes = edgert_dtype_size(info.dtype);
    fits = bytes > 0 && info.rank >= 0;
    for (int32_t d = 0; fits && d < info.rank; ++d) {
      fits = info.dims[d] >= 0;
      bytes *= static_cast<size_t>(std::max<int64_t>(info.dims[d], 0));
    }
    void* data = nullptr;
    fits = fits && edgert_engine_allocate(engine_, EDGERT_MEMORY_UNIFIED, std::max<size_t>(bytes, 1), &data, &error) == EDGERT_OK;
    if (fits) buffers.emplace_back(data, std::max<size_t>(bytes, 1));
  }
  for (size_t i = 0; fits && i < buffers.size(); ++i)
    fits = edgert_context_bind_output(context_, static_cast<int32_t>(i), buffers[i].first, buffers[i].second,
                                      EDGERT_MEMORY_UNIFIED, &error) == EDGERT_OK;
  for (const auto& [data, bytes] : buffers) {
    if (fits) output_buffers_.push_back(data);
    else edgert_engine_free(engine_, EDGERT_MEMORY_UNIFIED, data);
  }
  if (!fits)
    for (size_t i = 0; i < output_names_.size(); ++i)
      edgert_context_bind_output(context_, static_cast<int32_t>(i), nullptr, 0, EDGERT_MEMORY_UNIFIED, &error);
  in_place_ = fits;
  return in_place_;
}

const std::vector<edgert_tensor>& EngineHandle::run_in_place(const edgert_tensor& input) {
  edgert_error error{};
  if (edgert_context_bind_input(context_, 0, &input, EDGERT_MEMORY_UNIFIED, &error) != EDGERT_OK ||
      edgert_context_enqueue(context_, nullptr, &error) != EDGERT_OK ||
      edgert_context_synchronize(context_, &error) != EDGERT_OK)
    throw std::runtime_error(error.message);
  for (size_t i = 0; i < outputs_.size(); ++i) edgert_context_output(context_, static_cast<int32_t>(i), &outputs_[i]);
  return outputs_;
}

const std::vector<edgert_tensor>& EngineHandle::run(const edgert_tensor& input) {
  edgert_error error{};
  if (edgert_context_run(context_, &input, 1, &error) != EDGERT_OK) throw std::runtime_error(error.message);
  for (size_t i = 0; i < outputs_.size(); ++i) edgert_context_output(context_, static_cast<int32_t>(i), &outputs_[i]);
  return outputs_;
}

}  // namespace edgert::daemon

#include "loaded_engine.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <set>
#include <tuple>
#include <unordered_map>

#include "board.h"
#include "error.h"
#include "tensor_extent.h"

namespace edgert {
namespace {

const char* str(const flatbuffers::String* s) { return s ? s->c_str() : ""; }

}  // namespace

std::unique_ptr<LoadedEngine> LoadedEngine::load(const std::string& path, const edgert_load_options& options,
                                                  edgert_error* error) {
  auto engine = std::unique_ptr<LoadedEngine>(new LoadedEngine());
  if (!engine->file_.open(path, error) || !engine->resolve(options, error)) return nullptr;
  return engine;
}

std::unique_ptr<LoadedEngine> LoadedEngine::load_memory(const void* data, size_t size,
                                                        const edgert_load_options& options, edgert_error* error) {
  auto engine = std::unique_ptr<LoadedEngine>(new LoadedEngine());
  if (!engine->file_.open_memory(data, size, "<memory>", error) || !engine->resolve(options, error))
    return nullptr;
  return engine;
}

bool LoadedEngine::resolve(const edgert_load_options& options, edgert_error* error) {
  const fb::Engine* e = file_.engine();
  const char* where = file_.path().c_str();

  const fb::BoardRef* board = e->board();
  if (!board || !board->name() || !board->architecture() || !board->fingerprint()) {
    set_error(error, EDGERT_ERR_FORMAT, "engine '%s' does not say which board it was built for", where);
    return false;
  }
  board_ = board->name()->str();
  if (!options.allow_board_mismatch) {
    BoardHardware hw;
    hw.architecture = board->architecture()->str();
    if (board->cpu_features())
      for (const auto* f : *board->cpu_features()) hw.cpu_features.push_back(f->str());
    hw.gpu = board->gpu() ? board->gpu()->str() : "none";
    if (check_board_compatible(board_, hw, board->fingerprint()->str(),
                               options.expected_board ? options.expected_board : "",
                               options.host_board ? options.host_board : "", error) != EDGERT_OK) {
      prefix_error(error, "%s", where);
      return false;
    }
  }

  std::vector<std::string> search_path = plugin_search_path(options.plugin_path);
  if (e->plugins())
    for (const fb::PluginRef* ref : *e->plugins()) {
      if (ref->name()->str() == kBuiltinPlugin) {
        plugins_.push_back(nullptr);
        continue;
      }
      const LoadedPlugin* plugin = load_plugin(ref->name()->str(), search_path, error);
      if (!plugin) {
        prefix_error(error, "engine '%s' needs plugin '%s'", where, ref->name()->c_str());
        return false;
      }
      if (plugin->table->score && plugin->table->score() <= 0) {
        const std::string gpu = board->gpu() ? board->gpu()->str() : "none";
        set_error(error, EDGERT_ERR_PLUGIN,
                  "engine '%s' (board '%s'%s) needs plugin '%s' (%s), which cannot run on this machine%s", where,
                  board_.c_str(), gpu == "none" ? "" : (", GPU " + gpu).c_str(), ref->name()->c_str(),
                  plugin->path.c_str(), gpu == "none" ? "" : " (its score() is 0: no usable GPU here?)");
        return false;
      }
      plugins_.push_back(plugin);
    }

  graphs_.resize(e->graphs()->size());
  written_.resize(graphs_.size());
  tensors_named_.resize(graphs_.size());
  for (uint32_t g = 0; g < e->graphs()->size(); ++g) {
    if (g > 0 && graphs_[g].parent < 0) {
      set_error(error, EDGERT_ERR_FORMAT, "engine '%s': graph %u is not the subgraph of any node", where, g);
      return false;
    }
    if (!resolve_graph(g, error)) return false;
  }
  written_.clear();
  tensors_named_.clear();

  for (const auto* list : {e->inputs(), e->outputs()}) {
    bool is_input = list == e->inputs();
    if (!list) continue;
    for (const fb::Binding* b : *list) {
      (is_input ? inputs_ : outputs_).push_back(b->tensor());
      (is_input ? input_names_ : output_names_).push_back(b->name()->str());
    }
  }
  for (int32_t t : outputs_) graphs_[0].is_graph_output[t] = true;
  return resolve_profiles(error) && resolve_memory_plan(error) && resolve_device(error);
}

LoadedEngine::~LoadedEngine() {
  for (void* p : device_constants_)
    if (p) device_->free(EDGERT_MEMORY_DEVICE, p);
}

bool LoadedEngine::resolve_device(edgert_error* error) {
  const char* where = file_.path().c_str();
  for (const LoadedGraph& graph : graphs_)
    for (const LoadedNode& node : graph.nodes) {
      if (!node.device) continue;
      if (device_ && device_ != node.device) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s' runs nodes on two devices (plugin '%s' and another); one "
                  "device plugin per engine", where, node.plugin->name.c_str());
        return false;
      }
      if (&graph != &graphs_[0]) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node '%s' of a subgraph runs on a device; device kernels "
                  "run in the main graph only", where, node.node.name);
        return false;
      }
      device_ = node.device;
    }
  for (const LoadedGraph& graph : graphs_)
    for (const LoadedTensor& t : graph.tensors)
      if (t.space != EDGERT_MEMORY_HOST && (!device_ || &graph != &graphs_[0])) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': tensor '%s' lives in device memory, but no device kernel "
                  "of the main graph uses it", where, t.name);
        return false;
      }
  if (!device_) return true;
  // Constants device kernels read (except the operands they read on the host) are copied to
  // device memory once, here, and shared by every context.
  const LoadedGraph& main = graphs_[0];
  device_constants_.assign(main.tensors.size(), nullptr);
  void* stream = nullptr;
  if (device_->stream_create(&stream, error) != EDGERT_OK) return false;
  edgert_status status = EDGERT_OK;
  for (const LoadedNode& node : main.nodes) {
    if (!node.device) continue;
    for (size_t i = 0; i < node.inputs.size() && status == EDGERT_OK; ++i) {
      const int32_t t = node.inputs[i];
      if (t < 0 || !main.tensors[t].is_constant || device_constants_[t]) continue;
      if (i < 64 && (node.kernel->host_inputs >> i) & 1u) continue;
      size_t bytes = 0;
      if (!tensor_bytes(main.tensors[t].constant, &bytes)) continue;
      status = device_->allocate(EDGERT_MEMORY_DEVICE, bytes, &device_constants_[t], error);
      if (status == EDGERT_OK)
        status = device_->copy(device_constants_[t], EDGERT_MEMORY_DEVICE, main.tensors[t].constant.data,
                               EDGERT_MEMORY_HOST, bytes, stream, error);
    }
  }
  if (status == EDGERT_OK) status = device_->synchronize(stream, error);
  device_->stream_destroy(stream);
  if (status != EDGERT_OK) {
    prefix_error(error, "engine '%s': copying its weights to the device", where);
    return false;
  }
  return true;
}

bool LoadedEngine::resolve_memory_plan(edgert_error* error) {
  const fb::Engine* e = file_.engine();
  if (!e->memory_plans() || e->memory_plans()->size() == 0) return true;
  const size_t expected = std::max<size_t>(profiles_.size(), 1);
  if (e->memory_plans()->size() != expected) {
    set_error(error, EDGERT_ERR_FORMAT, "engine '%s' has %u memory plans for %zu optimization profile(s)",
              file_.path().c_str(), e->memory_plans()->size(), profiles_.size());
    return false;
  }
  for (uint32_t i = 0; i < e->memory_plans()->size(); ++i) {
    plans_.emplace_back();
    if (!verify_memory_plan(e->memory_plans()->Get(i), i, &plans_.back(), error)) {
      plans_.clear();
      return false;
    }
  }
  return true;
}

bool LoadedEngine::verify_memory_plan(const fb::MemoryPlan* p, uint32_t index, ArenaPlan* out, edgert_error* error) {
  const char* where = file_.path().c_str();
  // Far above any board's memory; keeps a hostile header from asking for an absurd arena.
  constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 40;
  const LoadedGraph& graph = graphs_[0];
  const size_t num_tensors = graph.tensors.size();
  const std::string which = plans_.size() > 1 || profiles_.size() > 1 ? " " + std::to_string(index) : "";
  auto bad = [&](const std::string& what) {
    set_error(error, EDGERT_ERR_FORMAT, "engine '%s': memory plan%s %s", where, which.c_str(), what.c_str());
    return false;
  };
  if (!p->offsets() || !p->sizes() || p->offsets()->size() != num_tensors || p->sizes()->size() != num_tensors)
    return bad("does not give an offset and size for each of the " + std::to_string(num_tensors) + " tensors");
  const uint64_t alignment = p->alignment();
  if (alignment < 64 || alignment > 4096 || (alignment & (alignment - 1)))
    return bad("has alignment " + std::to_string(alignment) + ", expected a power of two in [64, 4096]");
  if (p->arena_bytes() > kMaxArenaBytes || p->workspace_bytes() > kMaxArenaBytes)
    return bad("asks for " + std::to_string(p->arena_bytes()) + " arena and " + std::to_string(p->workspace_bytes()) +
               " workspace bytes, over the limit of " + std::to_string(kMaxArenaBytes));
  // The FlatBuffers verifier does not check the alignment of 8-byte vector elements.
  auto misaligned = [&](const void* d) { return (static_cast<const uint8_t*>(d) - file_.bytes()) % 8 != 0; };
  if ((num_tensors && misaligned(p->offsets()->Data())) || (num_tensors && misaligned(p->sizes()->Data())))
    return bad("tables are misaligned");

  // When each tensor is written and last read, as the executor will see it.
  const int32_t num_nodes = static_cast<int32_t>(graph.nodes.size());
  std::vector<int32_t> start(num_tensors, -1);
  std::vector<bool> builtin_output(num_tensors, false);
  for (int32_t n = 0; n < num_nodes; ++n)
    for (int32_t t : graph.nodes[n].outputs) {
      start[t] = n;
      // A copy between memory spaces writes an arena tensor like a kernel; subgraph ops do not.
      builtin_output[t] = graph.nodes[n].builtin != BuiltinOp::None && graph.nodes[n].builtin != BuiltinOp::Copy;
    }
  struct Block {
    int space;  // arenas of different spaces never overlap
    uint64_t offset, size;
    int32_t start, end;
    int32_t tensor;
  };
  std::vector<Block> blocks;
  ArenaPlan plan;
  plan.arena_bytes = p->arena_bytes();
  plan.alignment = alignment;
  plan.workspace_bytes = p->workspace_bytes();
  plan.device_arena_bytes = p->device_arena_bytes();
  plan.unified_arena_bytes = p->unified_arena_bytes();
  plan.device_workspace_bytes = p->device_workspace_bytes();
  for (uint64_t bytes : {plan.device_arena_bytes, plan.unified_arena_bytes, plan.device_workspace_bytes})
    if (bytes > kMaxArenaBytes) return bad("asks for a " + std::to_string(bytes) + "-byte device arena, over the limit");
  plan.offsets.assign(p->offsets()->begin(), p->offsets()->end());
  plan.sizes.assign(p->sizes()->begin(), p->sizes()->end());
  for (size_t t = 0; t < num_tensors; ++t) {
    const int64_t offset = plan.offsets[t];
    const uint64_t size = plan.sizes[t];
    if (offset == -1) continue;
    const std::string name = std::string("tensor '") + graph.tensors[t].name + "'";
    const uint64_t arena = plan.arena_bytes_of(graph.tensors[t].space);
    if (offset < 0 || static_cast<uint64_t>(offset) % alignment != 0 || size > arena ||
        static_cast<uint64_t>(offset) > arena - size)
      return bad("places " + name + " (" + std::to_string(size) + " bytes) at offset " + std::to_string(offset) +
                 ", outside the " + std::to_string(arena) + "-byte arena of its memory space or misaligned");
    if (start[t] < 0 || builtin_output[t] || graph.tensors[t].is_constant)
      return bad("places " + name + ", which is not written by a plugin kernel of the main graph");
    if (size == 0) continue;
    int32_t end = graph.is_graph_output[t] ? num_nodes : std::max(graph.last_use[t], start[t]);
    blocks.push_back({static_cast<int>(graph.tensors[t].space), static_cast<uint64_t>(offset), size, start[t], end,
                      static_cast<int32_t>(t)});
  }
  // A Concat's input planned at its place in the Concat's output (memory_planner.h): tensor
  // `input` lies at `output`'s offset plus the sizes of the inputs before it, and this Concat
  // is its last reader, so the two share bytes only as one value.
  std::set<std::pair<int32_t, int32_t>> concat_parts;  // (input, output)
  for (const LoadedNode& node : graph.nodes) {
    if (node.builtin != BuiltinOp::None || !node.node.domain || node.node.domain[0] != '\0' ||
        !node.node.op_type || std::strcmp(node.node.op_type, "Concat") != 0 || node.outputs.size() != 1 || node.outputs[0] < 0)
      continue;
    const int32_t out = node.outputs[0];
    if (plan.offsets[out] < 0) continue;
    uint64_t at = static_cast<uint64_t>(plan.offsets[out]);
    for (int32_t u : node.inputs) {
      if (u < 0 || plan.offsets[u] < 0 || static_cast<uint64_t>(plan.offsets[u]) != at) break;
      if (!graph.is_graph_output[u] && graph.last_use[u] == start[out]) concat_parts.emplace(u, out);
      at += plan.sizes[u];
    }
  }
  // Every pair alive at the same time whose bytes overlap must be one of the two sharings the
  // planner makes. A sweep over time: blocks in order of their first node, each checked against
  // the blocks still alive then, found by offset. Comparing each block with every block at an
  // offset below its end instead was quadratic in a long chain, whose tensors take turns at the
  // same few offsets.
  std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) {
    return std::tie(a.space, a.start, a.offset, a.tensor) < std::tie(b.space, b.start, b.offset, b.tensor);
  });
  std::set<std::pair<uint64_t, size_t>> alive;   // (offset, block)
  std::multiset<uint64_t> alive_sizes;           // how far back an alive block may reach
  std::vector<std::pair<int32_t, size_t>> dying;  // (end, block), a min-heap
  auto later_end = [&](const std::pair<int32_t, size_t>& x, const std::pair<int32_t, size_t>& y) { return x > y; };
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    if (i > 0 && blocks[i - 1].space != b.space) {
      alive.clear();
      alive_sizes.clear();
      dying.clear();
    }
    while (!dying.empty() && dying.front().first < b.start) {
      const size_t gone = dying.front().second;
      std::pop_heap(dying.begin(), dying.end(), later_end);
      dying.pop_back();
      alive.erase({blocks[gone].offset, gone});
      alive_sizes.erase(alive_sizes.find(blocks[gone].size));
    }
    const uint64_t reach = alive_sizes.empty() ? 0 : *alive_sizes.rbegin();
    auto it = alive.lower_bound({b.offset > reach ? b.offset - reach : 0, 0});
    for (; it != alive.end() && it->first < b.offset + b.size; ++it) {
      const Block& a = blocks[it->second];
      if (a.offset + a.size <= b.offset) continue;  // ends before b's bytes begin
      // In place: a node overwrites an input it reads for the last time with its output.
      if (a.offset == b.offset && a.start != b.start && (a.end == b.start || b.end == a.start)) continue;
      if (concat_parts.count({a.tensor, b.tensor}) || concat_parts.count({b.tensor, a.tensor})) continue;
      return bad("overlaps two tensors that are alive at the same time, '" + std::string(graph.tensors[a.tensor].name) +
                 "' and '" + graph.tensors[b.tensor].name + "' (offsets " + std::to_string(a.offset) + " and " +
                 std::to_string(b.offset) + ")");
    }
    alive.emplace(b.offset, i);
    alive_sizes.insert(b.size);
    dying.emplace_back(b.end, i);
    std::push_heap(dying.begin(), dying.end(), later_end);
  }
  *out = std::move(plan);
  return true;
}

bool LoadedEngine::resolve_profiles(edgert_error* error) {
  const fb::Engine* e = file_.engine();
  const char* where = file_.path().c_str();
  if (!e->profiles()) return true;
  for (uint32_t p = 0; p < e->profiles()->size(); ++p) {
    const fb::OptimizationProfile* profile = e->profiles()->Get(p);
    profiles_.emplace_back(inputs_.size());
    if (!profile->inputs()) continue;
    for (const fb::ShapeRange* r : *profile->inputs()) {
      size_t index = inputs_.size();
      for (size_t i = 0; i < input_names_.size(); ++i)
        if (r->input() && input_names_[i] == r->input()->str()) index = i;
      if (index == inputs_.size() || !r->min() || !r->opt() || !r->max()) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': optimization profile %u names an unknown input or lacks a "
                  "bound", where, p);
        return false;
      }
      const LoadedTensor& t = graphs_[0].tensors[inputs_[index]];
      size_t rank = r->min()->size();
      if (r->opt()->size() != rank || r->max()->size() != rank || rank > EDGERT_MAX_RANK ||
          (t.rank_known && rank != static_cast<size_t>(t.rank))) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': optimization profile %u of input '%s' has mismatched ranks",
                  where, p, input_names_[index].c_str());
        return false;
      }
      ShapeRange& range = profiles_.back()[index];
      range.min.assign(r->min()->begin(), r->min()->end());
      range.opt.assign(r->opt()->begin(), r->opt()->end());
      range.max.assign(r->max()->begin(), r->max()->end());
      for (size_t d = 0; d < rank; ++d)
        if (range.min[d] < 0 || range.min[d] > range.opt[d] || range.opt[d] > range.max[d]) {
          set_error(error, EDGERT_ERR_FORMAT, "engine '%s': optimization profile %u of input '%s' has min > opt > max "
                    "at dimension %zu", where, p, input_names_[index].c_str(), d);
          return false;
        }
    }
  }
  // Per-profile tactics must name one tactic for each profile.
  for (const LoadedGraph& graph : graphs_)
    for (const LoadedNode& node : graph.nodes)
      if (!node.profile_tactics.empty() && node.profile_tactics.size() != profiles_.size()) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node '%s' has tactics for %zu profiles; the engine has %zu",
                  where, node.node.name, node.profile_tactics.size(), profiles_.size());
        return false;
      }
  return true;
}

const LoadedEngine::ShapeRange* LoadedEngine::profile_range(size_t index) const {
  if (profiles_.empty() || index >= profiles_[0].size() || profiles_[0][index].min.empty()) return nullptr;
  return &profiles_[0][index];
}

edgert_status LoadedEngine::select_profile(const edgert_tensor* inputs, size_t num_inputs, size_t* profile,
                                           edgert_error* error) const {
  *profile = 0;
  if (profiles_.empty()) return EDGERT_OK;
  for (size_t p = 0; p < profiles_.size(); ++p) {
    bool inside = true;
    for (size_t i = 0; inside && i < num_inputs && i < profiles_[p].size(); ++i) {
      const ShapeRange& range = profiles_[p][i];
      if (range.min.empty()) continue;
      inside = static_cast<size_t>(inputs[i].rank) == range.min.size();
      for (size_t d = 0; inside && d < range.min.size(); ++d)
        inside = inputs[i].dims[d] >= range.min[d] && inputs[i].dims[d] <= range.max[d];
    }
    if (inside) {
      *profile = p;
      return EDGERT_OK;
    }
  }
  auto text = [](const int64_t* dims, size_t rank) {
    std::string s = "[";
    for (size_t i = 0; i < rank; ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
    return s + "]";
  };
  std::string given, allowed;
  for (size_t i = 0; i < num_inputs && i < input_names_.size(); ++i)
    given += (given.empty() ? "" : ", ") + input_names_[i] + " " + text(inputs[i].dims, std::max(0, inputs[i].rank));
  for (size_t p = 0; p < profiles_.size(); ++p) {
    allowed += (p ? "; profile " : "profile ") + std::to_string(p) + ":";
    for (size_t i = 0; i < profiles_[p].size(); ++i) {
      const ShapeRange& range = profiles_[p][i];
      if (range.min.empty()) continue;
      allowed += " " + input_names_[i] + " from min " + text(range.min.data(), range.min.size()) + " to max " +
                 text(range.max.data(), range.max.size());
    }
  }
  return set_error(error, EDGERT_ERR_SHAPE,
                   "input shapes %s are outside the engine's optimization profile%s: %s (rebuild with wider "
                   "--min-shapes/--max-shapes, or another profile, to accept them)",
                   given.c_str(), profiles_.size() > 1 ? "s" : "", allowed.c_str());
}

bool LoadedEngine::resolve_graph(uint32_t index, edgert_error* error) {
  const fb::Engine* e = file_.engine();
  const fb::Graph* g = e->graphs()->Get(index);
  const char* where = file_.path().c_str();
  LoadedGraph& graph = graphs_[index];

  uint32_t num_tensors = g->tensors() ? g->tensors()->size() : 0;
  graph.tensors.resize(num_tensors);
  for (uint32_t t = 0; t < num_tensors; ++t) {
    const fb::Tensor* src = g->tensors()->Get(t);
    LoadedTensor& dst = graph.tensors[t];
    dst.name = str(src->name());
    dst.dtype = src->dtype();
    dst.rank_known = src->rank_known();
    const int8_t space = src->memory_space();
    if (space < EDGERT_MEMORY_HOST || space > EDGERT_MEMORY_UNIFIED) {
      set_error(error, EDGERT_ERR_FORMAT, "engine '%s': tensor '%s' has memory space %d, which is none of host (0), "
                "device (1) and unified (2)", where, str(src->name()), static_cast<int>(space));
      return false;
    }
    dst.space = static_cast<edgert_memory_space>(space);
    if (src->kind() < 0 || src->kind() > 3) {
      set_error(error, EDGERT_ERR_FORMAT, "engine '%s': tensor '%s' has value kind %d, which is none of tensor (0), "
                "sequence (1), optional tensor (2) and optional sequence (3)", where, str(src->name()),
                static_cast<int>(src->kind()));
      return false;
    }
    dst.kind = static_cast<ValueKind>(src->kind());
    dst.rank = src->shape() ? static_cast<int32_t>(src->shape()->size()) : 0;
    for (int32_t d = 0; d < dst.rank; ++d) {
      dst.dims[d] = src->shape()->Get(d)->value();
      dst.dim_names[d] = src->shape()->Get(d)->name() ? src->shape()->Get(d)->name()->c_str() : nullptr;
    }
    if (src->weight() >= 0) {
      dst.is_constant = true;
      dst.constant.dtype = static_cast<edgert_dtype>(dst.dtype);
      dst.constant.rank = dst.rank;
      for (int32_t d = 0; d < dst.rank; ++d) dst.constant.dims[d] = dst.dims[d];
      const fb::WeightRegion* region = e->weights()->Get(src->weight());
      // Weights are read in place from the read-only mapping; kernels must not write inputs.
      dst.constant.data = const_cast<uint8_t*>(file_.weights_base() + region->offset());
    }
  }
  if (g->inputs()) graph.inputs.assign(g->inputs()->begin(), g->inputs()->end());
  if (g->outputs()) graph.outputs.assign(g->outputs()->begin(), g->outputs()->end());

  // Execution order must be sound: every tensor read is a constant, a graph input or written by
  // an earlier node, and no tensor is written twice. Subgraphs may also read outer-scope tensors.
  std::vector<bool> available(num_tensors, false);
  for (uint32_t t = 0; t < num_tensors; ++t) available[t] = graph.tensors[t].is_constant;
  for (int32_t t : graph.inputs) available[t] = true;
  graph.last_use.assign(num_tensors, -1);
  graph.is_graph_output.assign(num_tensors, false);
  for (int32_t t : graph.outputs) graph.is_graph_output[t] = true;

  uint32_t num_nodes = g->nodes() ? g->nodes()->size() : 0;
  std::vector<bool> produced(num_tensors, false);
  for (uint32_t n = 0; n < num_nodes; ++n)
    if (g->nodes()->Get(n)->outputs())
      for (int32_t t : *g->nodes()->Get(n)->outputs()) produced[t] = true;
  if (index > 0) {
    // A subgraph tensor that is not a constant, an input or written here is an enclosing
    // graph's, by name (ONNX outer-scope references). Tensors only the subgraph's own
    // subgraphs read are captured when those are resolved (capture_outer).
    std::vector<bool> read(num_tensors, false);
    for (uint32_t n = 0; n < num_nodes; ++n)
      if (g->nodes()->Get(n)->inputs())
        for (int32_t t : *g->nodes()->Get(n)->inputs())
          if (t >= 0) read[t] = true;
    for (int32_t t : graph.outputs) read[t] = true;
    for (uint32_t t = 0; t < num_tensors; ++t) {
      if (!read[t] || available[t] || produced[t]) continue;
      int32_t found = capture_outer(index, graph.tensors[t].name, error);
      if (found < 0) return false;
      graph.captures.emplace_back(static_cast<int32_t>(t), found);
      available[t] = true;
    }
  }
  std::vector<bool>& written = written_[index];
  written = available;
  for (uint32_t t = 0; t < num_tensors; ++t) written[t] = written[t] || produced[t];
  graph.nodes.resize(num_nodes);
  for (uint32_t n = 0; n < num_nodes; ++n) {
    const fb::Node* src = g->nodes()->Get(n);
    LoadedNode& node = graph.nodes[n];
    node.plugin = plugins_[src->plugin()];
    if (!node.plugin) {
      std::string kernel = src->kernel()->str();
      node.builtin = kernel == "builtin-if" ? BuiltinOp::If : kernel == "builtin-loop" ? BuiltinOp::Loop
                     : kernel == "builtin-scan" ? BuiltinOp::Scan : kernel == "builtin-copy" ? BuiltinOp::Copy
                     : kernel == "builtin-sequence" ? BuiltinOp::Sequence
                                                    : BuiltinOp::None;
      if (node.builtin == BuiltinOp::None) {
        set_error(error, EDGERT_ERR_PLUGIN, "engine '%s': node '%s' needs builtin op '%s', which this runtime "
                  "does not have", where, str(src->name()), kernel.c_str());
        return false;
      }
    } else if (!(node.kernel = node.plugin->find_kernel(src->kernel()->c_str()))) {
      set_error(error, EDGERT_ERR_PLUGIN,
                "engine '%s': node '%s' (%s) needs kernel '%s', which plugin '%s' (%s, version %s) does not "
                "have; install the plugin version the engine was built with or rebuild the engine",
                where, str(src->name()), str(src->op_type()), src->kernel()->c_str(), node.plugin->name.c_str(),
                node.plugin->path.c_str(), node.plugin->table->version);
      return false;
    }
    if (node.plugin) node.device = node.plugin->table->device;
    node.tactic = src->tactic();
    if (const auto* tactics = src->profile_tactics()) {
      // The FlatBuffers verifier does not check the alignment of 8-byte vector elements.
      if (tactics->size() && (reinterpret_cast<const uint8_t*>(tactics->Data()) - file_.bytes()) % 8 != 0) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node '%s' has a misaligned tactic table", where,
                  str(src->name()));
        return false;
      }
      node.profile_tactics.assign(tactics->begin(), tactics->end());
    }
    if (src->inputs()) node.inputs.assign(src->inputs()->begin(), src->inputs()->end());
    if (src->outputs()) node.outputs.assign(src->outputs()->begin(), src->outputs()->end());
    // plugin.h promises kernels at least one output; the builder never writes such a node.
    if (node.outputs.empty()) {
      set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node '%s' (%s) has no outputs", where, str(src->name()),
                str(src->op_type()));
      return false;
    }
    if (node.inputs.size() > 1024 || node.outputs.size() > 1024) {
      set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node '%s' has %zu inputs and %zu outputs, over the "
                "limit of 1024", where, str(src->name()), node.inputs.size(), node.outputs.size());
      return false;
    }
    for (int32_t t : node.inputs) {
      if (t < 0) continue;
      if (!available[t]) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node '%s' reads tensor '%s' before any node writes it",
                  where, str(src->name()), graph.tensors[t].name);
        return false;
      }
      graph.last_use[t] = static_cast<int32_t>(n);
    }
    for (int32_t t : node.outputs) {
      if (available[t]) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node '%s' writes tensor '%s', which already has a value",
                  where, str(src->name()), graph.tensors[t].name);
        return false;
      }
      available[t] = true;
    }

    uint32_t num_attributes = src->attributes() ? src->attributes()->size() : 0;
    node.attributes.resize(num_attributes);
    node.string_lists.resize(num_attributes);
    for (uint32_t a = 0; a < num_attributes; ++a) {
      const fb::Attribute* fa = src->attributes()->Get(a);
      edgert_attribute& attr = node.attributes[a];
      attr.name = fa->name()->c_str();
      attr.type = static_cast<edgert_attr_type>(fa->type());
      attr.i = fa->i();
      attr.f = fa->f();
      attr.graph = -1;
      switch (fa->type()) {
        case fb::AttributeType::String:
          attr.s = fa->s() ? reinterpret_cast<const char*>(fa->s()->data()) : "";
          attr.s_len = fa->s() ? fa->s()->size() : 0;
          break;
        case fb::AttributeType::Ints:
          attr.ints = fa->ints() ? fa->ints()->data() : nullptr;
          attr.count = fa->ints() ? fa->ints()->size() : 0;
          break;
        case fb::AttributeType::Floats:
          attr.floats = fa->floats() ? fa->floats()->data() : nullptr;
          attr.count = fa->floats() ? fa->floats()->size() : 0;
          break;
        case fb::AttributeType::Strings:
          if (fa->strings())
            for (const auto* s : *fa->strings()) node.string_lists[a].push_back(s->c_str());
          attr.strings = node.string_lists[a].data();
          attr.count = node.string_lists[a].size();
          break;
        case fb::AttributeType::Tensor: attr.tensor = &graph.tensors[fa->tensor()].constant; break;
        case fb::AttributeType::Graph: {
          attr.graph = fa->graph();
          LoadedGraph& sub = graphs_[attr.graph];
          if (sub.parent >= 0) {
            set_error(error, EDGERT_ERR_FORMAT, "engine '%s': graph %d is the subgraph of two nodes", where, attr.graph);
            return false;
          }
          sub.parent = static_cast<int32_t>(index);
          sub.parent_node = static_cast<int32_t>(n);
          std::string an = fa->name()->str();
          if (an == "then_branch") node.then_graph = attr.graph;
          else if (an == "else_branch") node.else_graph = attr.graph;
          else if (an == "body") node.body_graph = attr.graph;
          break;
        }
        default: break;
      }
    }
    node.node.name = str(src->name());
    node.node.domain = str(src->domain());
    node.node.op_type = str(src->op_type());
    node.node.opset = src->opset();
    node.node.num_inputs = static_cast<int32_t>(node.inputs.size());
    node.node.num_outputs = static_cast<int32_t>(node.outputs.size());
    node.node.num_attributes = static_cast<int32_t>(num_attributes);
    node.node.attributes = node.attributes.data();
    if (src->prepared() >= 0) {
      // Verified in range by EngineFile: the kernel borrows these bytes from the mapping.
      const fb::WeightRegion* region = e->weights()->Get(src->prepared());
      node.node.prepared = file_.weights_base() + region->offset();
      node.node.prepared_bytes = static_cast<size_t>(region->size());
    }
  }
  for (int32_t t : graph.outputs)
      if (!available[t]) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': graph output '%s' is never written", where,
                  graph.tensors[t].name);
        return false;
      }
  return true;
}

int32_t LoadedEngine::capture_outer(uint32_t index, const char* name, edgert_error* error) {
  // Up from the parent while a graph only passes the name on: the builder gives every graph
  // between the one defining a name and the one reading it a tensor of that name, which no node
  // there writes. chain[i] is (graph, its tensor of that name); chain[i + 1] is chain[i]'s parent.
  // A loop, not recursion: a hostile engine may nest thousands of graphs.
  std::vector<std::pair<uint32_t, int32_t>> chain;
  for (uint32_t child = index;;) {
    const uint32_t p = static_cast<uint32_t>(graphs_[child].parent);  // < child: subgraphs point forward
    const LoadedGraph& parent = graphs_[p];
    const std::vector<bool>& written = written_[p];
    auto& named = tensors_named_[p];
    if (named.empty())
      for (size_t t = 0; t < parent.tensors.size(); ++t)
        named[parent.tensors[t].name].push_back(static_cast<int32_t>(t));
    int32_t found = -1;  // the first tensor of that name with a value, else the first of that name
    if (auto same = named.find(name); same != named.end())
      for (int32_t t : same->second)
        if (found < 0 || (!written[found] && written[t])) found = t;
    if (found < 0) {
      set_error(error, EDGERT_ERR_FORMAT, "engine '%s': subgraph %u reads '%s', which neither it nor any enclosing "
                "graph defines", file_.path().c_str(), index, name);
      return -1;
    }
    chain.emplace_back(p, found);
    // A main-graph tensor nobody writes is captured as it is: the run names it when a node
    // reads it ("has no value"), and engines whose untaken branch reads one load as before.
    if (written[found] || p == 0) break;
    child = p;
  }
  uint32_t below = index;
  for (size_t i = 0; i < chain.size(); ++i) {
    const auto [g, t] = chain[i];
    if (i + 1 < chain.size()) {
      graphs_[g].captures.emplace_back(t, chain[i + 1].second);
      written_[g][t] = true;
    }
    // Alive until the node running the graph below is done.
    int32_t& last = graphs_[g].last_use[t];
    last = std::max(last, graphs_[below].parent_node);
    below = g;
  }
  return chain[0].second;
}

void fill_tensor_info(const LoadedTensor& tensor, const std::string& binding_name, edgert_tensor_info* info) {
  *info = edgert_tensor_info{};
  info->name = binding_name.c_str();
  info->dtype = static_cast<edgert_dtype>(tensor.dtype);
  info->rank = tensor.rank_known ? tensor.rank : -1;
  for (int32_t d = 0; d < tensor.rank; ++d) {
    info->dims[d] = tensor.dims[d];
    info->dim_names[d] = tensor.dim_names[d];
  }
}

}  // namespace edgert

// What an engine file holds as JSON (`edgert inspect --json`, edgert_inspect_engine_file).
#include "engine_json.h"

#include <algorithm>

#include "error.h"
#include "passes/graph_rewrite.h"

namespace edgert::cli {
namespace {

using nlohmann::ordered_json;

std::string str(const flatbuffers::String* s) { return s ? s->str() : ""; }

// The main graph's memory plan, when the engine has one.
const fb::MemoryPlan* main_plan(const fb::Engine* e) {
  if (!e->memory_plans() || e->memory_plans()->size() == 0) return nullptr;
  const fb::MemoryPlan* p = e->memory_plans()->Get(0);
  uint32_t tensors = e->graphs()->Get(0)->tensors() ? e->graphs()->Get(0)->tensors()->size() : 0;
  if (!p->offsets() || !p->sizes() || p->offsets()->size() != tensors || p->sizes()->size() != tensors) return nullptr;
  return p;
}

// "conv1 + bn1 + relu1" -> the parts the builder fused into one layer.

ordered_json tensor_json(const fb::Graph* g, int32_t index, const fb::MemoryPlan* plan = nullptr) {
  if (index < 0) return nullptr;
  const fb::Tensor* t = g->tensors()->Get(index);
  ordered_json shape = ordered_json::array();
  if (t->shape())
    for (const fb::Dim* d : *t->shape()) {
      if (d->value() >= 0) shape.push_back(d->value());
      else shape.push_back(d->name() ? d->name()->str() : "?");
    }
  // Sequences and optionals read as ONNX writes their types: sequence(float32), optional(...).
  std::string type = dtype_name(t->dtype());
  if (t->kind() == 1 || t->kind() == 3) type = "sequence(" + type + ")";
  if (t->kind() == 2 || t->kind() == 3) type = "optional(" + type + ")";
  ordered_json j = {{"name", str(t->name())}, {"dtype", type}};
  j["shape"] = t->rank_known() ? shape : ordered_json(nullptr);
  if (plan) {
    int64_t offset = plan->offsets()->Get(index);
    j["arena_offset"] = offset >= 0 ? ordered_json(offset) : ordered_json(nullptr);
    j["bytes"] = offset >= 0 ? ordered_json(plan->sizes()->Get(index)) : ordered_json(nullptr);
  }
  static const char* const kSpaces[] = {"host", "device", "unified"};
  const int space = t->memory_space();
  j["memory_space"] = space >= 0 && space <= 2 ? kSpaces[space] : "unknown";
  return j;
}

}  // namespace

ordered_json engine_json(const EngineFile& file) {
  const fb::Engine* e = file.engine();
  ordered_json j;
  j["file"] = file.path();
  j["file_bytes"] = file.size();
  j["format_version"] = e->format_version();
  j["producer"] = str(e->producer());
  j["source_model"] = str(e->source_model());
  ordered_json board = {{"name", str(e->board()->name())}, {"fingerprint", str(e->board()->fingerprint())},
                        {"architecture", str(e->board()->architecture())}, {"cpu_features", ordered_json::array()}};
  if (e->board()->cpu_features())
    for (const auto* f : *e->board()->cpu_features()) board["cpu_features"].push_back(f->str());
  board["gpu"] = e->board()->gpu() ? str(e->board()->gpu()) : "none";  // absent in older engines
  j["board"] = board;
  j["plugins"] = ordered_json::array();
  if (e->plugins())
    for (const fb::PluginRef* p : *e->plugins()) {
      ordered_json kernels = ordered_json::array();
      if (p->kernels())
        for (const auto* k : *p->kernels()) kernels.push_back(k->str());
      j["plugins"].push_back({{"name", str(p->name())}, {"abi_version", p->abi_version()},
                              {"version", str(p->version())}, {"kernels", kernels}});
    }
  const fb::Graph* main = e->graphs()->Get(0);
  j["inputs"] = ordered_json::array();
  j["outputs"] = ordered_json::array();
  if (e->inputs())
    for (const fb::Binding* b : *e->inputs()) j["inputs"].push_back(tensor_json(main, b->tensor()));
  if (e->outputs())
    for (const fb::Binding* b : *e->outputs()) j["outputs"].push_back(tensor_json(main, b->tensor()));
  uint64_t weight_bytes = 0;
  if (e->weights())
    for (const fb::WeightRegion* w : *e->weights()) weight_bytes += w->size();
  const fb::MemoryPlan* plan = main_plan(e);
  j["graphs"] = ordered_json::array();
  uint64_t prepared_bytes = 0;
  for (uint32_t g = 0; g < e->graphs()->size(); ++g) {
    const fb::Graph* graph = e->graphs()->Get(g);
    ordered_json nodes = ordered_json::array();
    if (graph->nodes())
      for (const fb::Node* n : *graph->nodes()) {
        const fb::MemoryPlan* graph_plan = g == 0 ? plan : nullptr;
        // The dtype the layer writes; an 8-bit one is an int8 layer (QLinearConv and the other
        // int8 ops write uint8; byte moves between them too).
        std::string precision = "unknown";
        if (n->outputs() && n->outputs()->size() && graph->tensors()->Get(n->outputs()->Get(0))->dtype()) {
          const int32_t dtype = graph->tensors()->Get(n->outputs()->Get(0))->dtype();
          precision = dtype == EDGERT_DTYPE_UINT8 || dtype == EDGERT_DTYPE_INT8 ? "int8" : dtype_name(dtype);
        }
        size_t fused_nodes = 1;
        const std::vector<std::string> parts = builder::fused_name_parts(str(n->name()), &fused_nodes);
        ordered_json node = {{"name", str(n->name())}, {"parts", parts}, {"fused_nodes", fused_nodes}, {"op", (n->domain() && n->domain()->size() ? str(n->domain()) + "." : "") + str(n->op_type())},
                             {"plugin", str(e->plugins()->Get(n->plugin())->name())}, {"kernel", str(n->kernel())},
                             {"tactic", n->tactic()}, {"precision", precision}, {"inputs", ordered_json::array()},
                             {"outputs", ordered_json::array()}};
        if (n->inputs())
          for (int32_t t : *n->inputs()) node["inputs"].push_back(tensor_json(graph, t, graph_plan));
        if (n->outputs())
          for (int32_t t : *n->outputs()) node["outputs"].push_back(tensor_json(graph, t, graph_plan));
        node["tactic_name"] = n->tactic_name() ? ordered_json(n->tactic_name()->str()) : ordered_json(nullptr);
        node["precision_note"] = n->precision_note() ? ordered_json(n->precision_note()->str()) : ordered_json(nullptr);
        node["kernel_state_bytes"] = n->kernel_state_bytes();
        // Weights stored in the layout the tactic reads, mapped at load instead of packed.
        const uint64_t prepared = n->prepared() >= 0 ? e->weights()->Get(n->prepared())->size() : 0;
        node["prepared_bytes"] = prepared;
        if (g == 0) prepared_bytes += prepared;
        // Per optimization profile, when the engine has several.
        node["profile_tactics"] = ordered_json::array();
        if (n->profile_tactics())
          for (uint32_t p = 0; p < n->profile_tactics()->size(); ++p)
            node["profile_tactics"].push_back(
                {{"tactic", n->profile_tactics()->Get(p)},
                 {"tactic_name", n->profile_tactic_names() && p < n->profile_tactic_names()->size()
                                     ? ordered_json(n->profile_tactic_names()->Get(p)->str())
                                     : ordered_json(nullptr)}});
        nodes.push_back(node);
      }
    j["graphs"].push_back({{"index", g}, {"name", str(graph->name())}, {"nodes", nodes}});
  }
  uint64_t arena = plan ? plan->arena_bytes() : 0, workspace = plan ? plan->workspace_bytes() : 0;
  uint64_t activation_bytes = 0, largest = 0, planned = 0;
  if (plan)
    for (uint32_t t = 0; t < plan->offsets()->size(); ++t)
      if (plan->offsets()->Get(t) >= 0) {
        activation_bytes += plan->sizes()->Get(t);
        largest = std::max<uint64_t>(largest, plan->sizes()->Get(t));
        ++planned;
      }
  const uint64_t device_arena = plan ? plan->device_arena_bytes() : 0, unified_arena = plan ? plan->unified_arena_bytes() : 0,
                 device_workspace = plan ? plan->device_workspace_bytes() : 0;
  // What kernels keep after prepare (packed weights): held beside the mapped weights.
  const uint64_t kernel_state = plan ? plan->kernel_state_bytes() : 0;
  j["memory_plan"] = plan ? ordered_json{{"arena_bytes", arena}, {"alignment", plan->alignment()},
                                         {"workspace_bytes", workspace}, {"planned_tensors", planned},
                                         {"activation_bytes", activation_bytes}, {"largest_tensor_bytes", largest},
                                         {"device_arena_bytes", device_arena}, {"unified_arena_bytes", unified_arena},
                                         {"device_workspace_bytes", device_workspace},
                                         {"kernel_state_bytes", kernel_state}}
                          : ordered_json(nullptr);
  j["totals"] = {{"nodes", main->nodes() ? main->nodes()->size() : 0},
                 {"tensors", main->tensors() ? main->tensors()->size() : 0},
                 {"weights", e->weights() ? e->weights()->size() : 0},
                 {"weight_bytes", weight_bytes},
                 {"arena_bytes", arena},
                 {"workspace_bytes", workspace},
                 {"kernel_state_bytes", kernel_state},
                 {"prepared_bytes", prepared_bytes},
                 {"unread_weight_bytes", e->unread_weight_bytes()},
                 // The whole file but the weights no kernel reads (the load's checksum reads every
                 // page but leaves none resident); edgertd counts it the same way.
                 {"footprint_bytes", file.size() - std::min<uint64_t>(e->unread_weight_bytes(), file.size()) +
                                         kernel_state + arena + workspace + device_arena + unified_arena +
                                         device_workspace},
                 {"device_arena_bytes", device_arena + unified_arena},
                 {"device_workspace_bytes", device_workspace}};
  // Optimization profiles: per profile, each dynamic input's min, opt and max shapes.
  j["profiles"] = ordered_json::array();
  if (e->profiles())
    for (uint32_t p = 0; p < e->profiles()->size(); ++p) {
      ordered_json inputs = ordered_json::array();
      if (const auto* ranges = e->profiles()->Get(p)->inputs())
        for (const fb::ShapeRange* r : *ranges) {
          auto dims = [](const flatbuffers::Vector<int64_t>* v) {
            ordered_json a = ordered_json::array();
            if (v)
              for (int64_t d : *v) a.push_back(d);
            return a;
          };
          inputs.push_back({{"name", str(r->input())}, {"min", dims(r->min())}, {"opt", dims(r->opt())},
                            {"max", dims(r->max())}});
        }
      j["profiles"].push_back({{"index", p}, {"inputs", inputs}});
    }
  return j;
}


}  // namespace edgert::cli

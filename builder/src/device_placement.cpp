#include "device_placement.h"

#include <cstring>
#include <map>
#include <set>

#include "edgert/dtype_info.h"
#include "edgert/float16.h"
#include "kernel_selection.h"
#include "node_view.h"
#include "passes/graph_rewrite.h"

namespace edgert::builder {
namespace {

bool is_integer_dtype(int32_t dtype) {
  switch (dtype) {
    case EDGERT_DTYPE_INT64: case EDGERT_DTYPE_INT32: case EDGERT_DTYPE_INT16: case EDGERT_DTYPE_INT8:
    case EDGERT_DTYPE_UINT64: case EDGERT_DTYPE_UINT32: case EDGERT_DTYPE_UINT16: case EDGERT_DTYPE_UINT8:
    case EDGERT_DTYPE_BOOL:
      return true;
    default:
      return false;
  }
}

// Shape arithmetic and index bookkeeping: every output an integer. Its results feed shape
// operands that kernels read on the host, and a GPU gains nothing on a handful of int64s.
// ArgMax and ArgMin are the exception: they reduce float data (a segmenter's scores to its
// class map), and on the device only the reduced result crosses to the host.
bool computes_integers(const Graph& graph, const Node& node) {
  if (node.outputs.empty()) return false;
  if (node.domain.empty() && (node.op_type == "ArgMax" || node.op_type == "ArgMin") && !node.inputs.empty() &&
      !is_integer_dtype(graph.values[node.inputs[0]].dtype))
    return false;
  for (int32_t t : node.outputs) {
    const int32_t dtype = graph.values[t].dtype;
    // 8-bit outputs are an INT8 network's activations, not bookkeeping.
    if (!is_integer_dtype(dtype) || dtype == EDGERT_DTYPE_UINT8 || dtype == EDGERT_DTYPE_INT8) return false;
  }
  return true;
}

// Whether every present input and output of `node` has a known dtype. A device kernel checks
// dtypes in its prepare, which the builder runs only where shapes are static; a value whose
// dtype inference could not tell (data-dependent stretches of detectors' post-processing)
// would reach a device kernel untested, so such nodes stay on the host, whose kernels take
// whatever dtype arrives.
bool dtypes_known(const Graph& graph, const Node& node) {
  for (const auto* list : {&node.inputs, &node.outputs})
    for (int32_t t : *list)
      if (t >= 0 && graph.values[t].dtype == EDGERT_DTYPE_UNDEFINED) return false;
  return true;
}

bool same_domain(const char* kernel_domain, const std::string& node_domain) {
  std::string k = kernel_domain ? kernel_domain : "";
  if (k == "ai.onnx") k.clear();
  return k == node_domain;
}

// The kernel of `plugin` that takes `node`, or null.
const edgert_kernel* kernel_in(const LoadedPlugin& plugin, const Graph& graph, const Node& node) {
  NodeView view(graph, node);
  for (int32_t k = 0; k < plugin.table->num_kernels; ++k) {
    const edgert_kernel& kernel = plugin.table->kernels[k];
    if (std::strcmp(kernel.op_type, node.op_type.c_str()) != 0 || !same_domain(kernel.domain, node.domain)) continue;
    if (kernel.supports && !kernel.supports(&kernel, view.node(), view.inputs())) continue;
    return &kernel;
  }
  return nullptr;
}

const LoadedPlugin* plugin_named(const PlacementOptions& options, const std::string& name) {
  for (const LoadedPlugin* p : options.plugins)
    if (p->name == name) return p;
  return nullptr;
}

// The plugin of the graph's device nodes ("" when none is on a device).
std::string device_plugin_of(const Graph& graph) {
  for (const Node& node : graph.nodes)
    if (node.on_device) return node.plugin;
  return "";
}

// Ops whose float16 results drift from float32 beyond what a classifier tolerates: exponentials
// and sums over many terms, and the normalizations built on them. Not Softmax and
// LayerNormalization: the CUDA kernels compute them in float whatever their I/O, and their
// operands come from and go to float16 layers in transformers, so float32 I/O only added a Cast
// on each side (the same values: float16 widened exactly, and rounded once on the way out).
bool keeps_float32(const Node& node) {
  static const std::set<std::string> ops = {"LogSoftmax", "InstanceNormalization",
                                            "GroupNormalization", "ReduceSum", "ReduceMean", "ReduceProd",
                                            "ReduceL2", "ReduceLogSumExp", "Exp", "Log", "Pow", "Erf",
                                            "CumSum", "Softplus", "TopK", "NonMaxSuppression"};
  return (node.domain.empty() && ops.count(node.op_type)) || node.domain == "ai.onnx.ml";
}

std::shared_ptr<const std::vector<uint8_t>> to_half_data(const std::vector<uint8_t>& floats) {
  auto half = std::make_shared<std::vector<uint8_t>>(floats.size() / 2);
  const size_t count = floats.size() / 4;
  for (size_t i = 0; i < count; ++i) {
    float f;
    std::memcpy(&f, floats.data() + 4 * i, 4);
    const uint16_t h = edgert_float_to_half(f);
    std::memcpy(half->data() + 2 * i, &h, 2);
  }
  return half;
}

// A node placement inserts on the device (a cast, a layout reformat): one input, one output and
// one attribute, named "to" as both ops name theirs.
Node device_node(const std::string& name, const char* domain, const char* op_type, int32_t opset, int32_t from,
                 int32_t to, Attribute attribute, const std::string& device_plugin) {
  Node node;
  node.name = name;
  node.domain = domain;
  node.op_type = op_type;
  node.opset = opset;
  node.inputs = {from};
  node.outputs = {to};
  attribute.name = "to";
  node.attributes = {std::move(attribute)};
  node.plugin = device_plugin;
  node.on_device = true;
  return node;
}

Node cast_node(const std::string& name, int32_t from, int32_t to, int32_t dtype, const std::string& device_plugin) {
  Attribute attr;
  attr.type = EDGERT_ATTR_INT;
  attr.i = dtype;
  return device_node(name, "", "Cast", 13, from, to, std::move(attr), device_plugin);
}

}  // namespace

void place_nodes(Model& model, const PlacementOptions& options) {
  for (Graph& graph : model.graphs) {
    const bool main = &graph == &model.graphs[0];
    for (Node& node : graph.nodes) {
      node.plugin.clear();
      node.on_device = false;
      if (builtin_kernel(node)) continue;
      const bool integers = computes_integers(graph, node);
      const bool typed = dtypes_known(graph, node);
      // Host plugins first for what must stay on the host, devices first (by score) otherwise.
      for (int pass = 0; pass < 2 && node.plugin.empty(); ++pass)
        for (const LoadedPlugin* plugin : options.plugins) {
          const bool device = plugin->table->device != nullptr;
          if (device && (!main || !typed || (integers && pass == 0))) continue;
          if (!device && pass == 0 && !integers) continue;
          if (!kernel_in(*plugin, graph, node)) continue;
          node.plugin = plugin->name;
          node.on_device = device;
          break;
        }
    }
  }
  if (options.log) {
    size_t device = 0, total = model.graphs[0].nodes.size();
    for (const Node& node : model.graphs[0].nodes) device += node.on_device;
    if (device) options.log("placement: " + std::to_string(device) + " of " + std::to_string(total) +
                            " main-graph nodes on the device, the rest on the host");
  }
}

int convert_device_nodes_to_fp16(Model& model, const PlacementOptions& options) {
  Graph& graph = model.graphs[0];
  const std::string device_plugin = device_plugin_of(graph);
  if (device_plugin.empty()) return 0;
  const LoadedPlugin* plugin = plugin_named(options, device_plugin);

  // Which nodes run in float16: device nodes with float32 data whose kernel takes float16 for
  // every float32 operand it does not read on the host.
  std::vector<bool> half(graph.nodes.size(), false);
  std::vector<std::vector<bool>> convert_input(graph.nodes.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& node = graph.nodes[n];
    if (!node.on_device) continue;
    if (keeps_float32(node)) {
      node.precision_note = "float32: drifts in float16 (exponentials, long sums)";
      continue;
    }
    // A Cast writes the dtype its `to` names: made float16 here, it would still write float32
    // into a float16-sized tensor. Its float16 readers get a Cast of its output instead.
    if (node.domain.empty() && (node.op_type == "Cast" || node.op_type == "CastLike")) continue;
    const edgert_kernel* kernel = kernel_in(*plugin, graph, node);
    if (!kernel) continue;
    bool has_float = false;
    convert_input[n].assign(node.inputs.size(), false);
    std::vector<std::pair<int32_t, int32_t>> saved;  // value, dtype: the trial's dtypes go back after
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int32_t t = node.inputs[i];
      if (t < 0 || (i < 64 && (kernel->host_inputs >> i) & 1u)) continue;
      // A value read twice (Mul(x, x); the fused attention's Q, K and V from one packed
      // projection) is float16 at its second read already: this trial made it so.
      bool trial_half = false;
      for (const auto& entry : saved) trial_half = trial_half || entry.first == t;
      if (!trial_half && graph.values[t].dtype != EDGERT_DTYPE_FLOAT32) continue;
      convert_input[n][i] = true;
      has_float = true;
      if (trial_half) continue;
      saved.emplace_back(t, graph.values[t].dtype);
      graph.values[t].dtype = EDGERT_DTYPE_FLOAT16;
    }
    for (int32_t t : node.outputs) has_float = has_float && graph.values[t].dtype == EDGERT_DTYPE_FLOAT32;
    half[n] = has_float && kernel_in(*plugin, graph, node) != nullptr;
    for (const auto& [t, dtype] : saved) graph.values[t].dtype = dtype;
  }
  // The accuracy check's leading layers kept float32 (fp16_accuracy.h).
  for (size_t n = 0, kept = 0; n < graph.nodes.size() && kept < static_cast<size_t>(std::max(options.float32_prefix, 0)); ++n)
    if (half[n]) {
      half[n] = false;
      graph.nodes[n].precision_note = "float32: kept by the FP16 accuracy check";
      ++kept;
    }

  // Readers of each value, to know where a float32 version is still needed.
  std::vector<std::vector<size_t>> readers(graph.values.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n)
    for (int32_t t : graph.nodes[n].inputs)
      if (t >= 0) readers[t].push_back(n);
  std::vector<bool> is_output(graph.values.size(), false);
  for (int32_t t : graph.outputs) is_output[t] = true;

  std::map<int32_t, int32_t> half_of;  // float32 value -> its float16 version
  std::vector<Node> nodes;
  int converted = 0, casts = 0;
  auto half_value = [&](int32_t t, const std::string& suffix) {
    Value v = graph.values[t];
    v.name += suffix;
    v.dtype = EDGERT_DTYPE_FLOAT16;
    if (v.data) v.data = to_half_data(*v.data);
    return graph.add_value(std::move(v));
  };
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node node = graph.nodes[n];
    if (half[n]) {
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const int32_t t = node.inputs[i];
        if (!convert_input[n][i]) continue;
        auto it = half_of.find(t);
        if (it == half_of.end()) {
          if (graph.values[t].is_constant()) {
            it = half_of.emplace(t, half_value(t, ":fp16")).first;
          } else {  // a float32 activation: cast on the device right before its first half reader
            const int32_t h = half_value(t, ":fp16");
            nodes.push_back(cast_node(graph.values[t].name + " (to fp16)", t, h, EDGERT_DTYPE_FLOAT16, device_plugin));
            ++casts;
            it = half_of.emplace(t, h).first;
          }
        }
        node.inputs[i] = it->second;
      }
      // The node writes float16 versions of its outputs; the float32 ones are cast from them
      // where a float32 reader or the engine's caller needs them.
      std::vector<int32_t> back;
      for (int32_t& t : node.outputs) {
        const int32_t h = half_value(t, ":fp16");
        half_of[t] = h;
        bool needs_float = is_output[t];
        for (size_t r : readers[t]) needs_float = needs_float || !half[r];
        if (needs_float) back.push_back(t);
        t = h;
      }
      node.precision_note = "float16 (--fp16)";
      nodes.push_back(std::move(node));
      for (int32_t t : back) {
        nodes.push_back(cast_node(graph.values[t].name + " (to fp32)", half_of[t], t, EDGERT_DTYPE_FLOAT32, device_plugin));
        ++casts;
      }
      ++converted;
      continue;
    }
    nodes.push_back(std::move(node));
  }
  graph.nodes = std::move(nodes);
  if (options.log)
    options.log("fp16: " + std::to_string(converted) + " device nodes in float16, " + std::to_string(casts) +
                " Cast nodes where float32 and float16 meet");
  return converted;
}

int convert_device_nodes_to_channels_last(Model& model, const PlacementOptions& options) {
  Graph& graph = model.graphs[0];
  const std::string device_plugin = device_plugin_of(graph);
  if (device_plugin.empty()) return 0;
  const LoadedPlugin* plugin = plugin_named(options, device_plugin);
  // An activation whose layout this pass decides: float and uint8 tensors the nodes compute.
  auto activation = [&](int32_t t) {
    if (t < 0) return false;
    const Value& v = graph.values[t];
    return !v.is_constant() &&
           (v.dtype == EDGERT_DTYPE_FLOAT16 || v.dtype == EDGERT_DTYPE_FLOAT32 || v.dtype == EDGERT_DTYPE_UINT8);
  };
  auto rank4_activation = [&](int32_t t) {
    return activation(t) && graph.values[t].rank_known && graph.values[t].shape.size() == 4;
  };
  Attribute layout;
  layout.name = "layout";
  layout.type = EDGERT_ATTR_STRING;
  layout.s = "NHWC";
  // An activation whose rank shape inference could not tell (a Slice whose bounds are computed
  // from shapes, before a profile fixes them): a channels-last kernel stores it channels-last if
  // it turns out rank 4 at run time, and this pass, which cannot tell, would not reformat it
  // where it meets a row-major node.
  auto unknown_rank_activation = [&](int32_t t) { return activation(t) && !graph.values[t].rank_known; };
  // Which nodes go channels-last: device nodes with a rank-4 activation whose kernel takes it,
  // and no activation of unknown rank (those stay row-major, so every channels-last tensor is
  // one this pass knows to be rank 4). Channels-last starts at the ops that gain from it
  // (convolutions and pools on tensor cores, the INT8 network's quantize ops) and spreads to the
  // ops reading what they wrote; an elementwise op elsewhere stays row-major. A transformer's
  // [B, H, W, C] activations (swin_t: one patch-embedding convolution, then LayerNorms, MatMuls,
  // window Slices and residual Adds) had every Add channels-last between row-major neighbours,
  // a Reformat on each side.
  auto seeds_channels_last = [](const Node& node) {
    static const std::set<std::string> onnx_ops = {"Conv", "ConvTranspose", "QLinearConv", "MaxPool", "AveragePool",
                                                   "GlobalAveragePool", "GlobalMaxPool", "QuantizeLinear",
                                                   "DequantizeLinear", "BatchNormalization", "InstanceNormalization"};
    static const std::set<std::string> edgert_ops = {"FusedConv", "QLinearConvAdd"};
    return node.domain.empty() ? onnx_ops.count(node.op_type) > 0
                               : node.domain == "edgert" && edgert_ops.count(node.op_type) > 0;
  };
  std::vector<bool> nhwc(graph.nodes.size(), false), written_nhwc(graph.values.size(), false);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& node = graph.nodes[n];
    if (!node.on_device || node.attribute("layout")) continue;
    bool rank4 = false, unknown_rank = false, follows = false;
    for (const auto* list : {&node.inputs, &node.outputs})
      for (int32_t t : *list) {
        rank4 = rank4 || rank4_activation(t);
        unknown_rank = unknown_rank || unknown_rank_activation(t);
      }
    for (int32_t t : node.inputs) follows = follows || (rank4_activation(t) && written_nhwc[t]);
    if (!rank4 || unknown_rank || !(follows || seeds_channels_last(node))) continue;
    node.attributes.push_back(layout);
    nhwc[n] = kernel_in(*plugin, graph, node) != nullptr;
    node.attributes.pop_back();
    if (nhwc[n])
      for (int32_t t : node.outputs)
        if (rank4_activation(t)) written_nhwc[t] = true;
  }
  std::vector<bool> stored_nhwc(graph.values.size(), false);
  std::map<std::pair<int32_t, bool>, int32_t> reformatted;  // (value, to NHWC) -> reformatted value
  std::vector<Node> nodes;
  int converted = 0, reformats = 0;
  auto same_bytes = [&](int32_t t) {  // [N, C, 1, 1]: one element per channel in either layout
    const Value& v = graph.values[t];
    return v.shape[2].value == 1 && v.shape[3].value == 1;
  };
  auto reformat = [&](int32_t t, bool to_nhwc) {
    auto it = reformatted.find({t, to_nhwc});
    if (it != reformatted.end()) return it->second;
    Value v = graph.values[t];
    v.name += to_nhwc ? ":nhwc" : ":nchw";
    const int32_t r = graph.add_value(std::move(v));
    Attribute layout;
    layout.type = EDGERT_ATTR_STRING;
    layout.s = to_nhwc ? "NHWC" : "NCHW";
    nodes.push_back(device_node(graph.values[t].name + (to_nhwc ? " (to NHWC)" : " (to NCHW)"), "edgert", "Reformat", 1,
                                t, r, std::move(layout), device_plugin));
    ++reformats;
    stored_nhwc.resize(graph.values.size(), false);
    stored_nhwc[r] = to_nhwc;
    return reformatted[{t, to_nhwc}] = r;
  };
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node node = graph.nodes[n];
    // A channels-last QuantizeLinear of a row-major float tensor (the engine's input) reads it as
    // it is and writes channels-last bytes: one pass instead of reformatting four-byte floats.
    const bool quantize_from_nchw = nhwc[n] && node.domain.empty() && node.op_type == "QuantizeLinear" &&
                                    !node.inputs.empty() && rank4_activation(node.inputs[0]) &&
                                    !same_bytes(node.inputs[0]) && !stored_nhwc[node.inputs[0]];
    if (quantize_from_nchw) {
      Attribute input_layout;
      input_layout.name = "input_layout";
      input_layout.type = EDGERT_ATTR_STRING;
      input_layout.s = "NCHW";
      node.set_attribute(input_layout);
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      int32_t& t = node.inputs[i];
      if (quantize_from_nchw && i == 0) continue;
      if (!rank4_activation(t) || same_bytes(t) || stored_nhwc[t] == nhwc[n]) continue;
      t = reformat(t, nhwc[n]);
    }
    if (nhwc[n]) {
      node.set_attribute(layout);
      // A dense convolution reads its weights [M, KH, KW, C/group] (cuDNN's KRSC).
      const bool conv = (node.domain.empty() && node.op_type == "Conv") ||
                        (node.domain == "edgert" && node.op_type == "FusedConv");
      const bool qconv = (node.domain.empty() && node.op_type == "QLinearConv") ||
                         (node.domain == "edgert" && node.op_type == "QLinearConvAdd");
      const size_t weights = qconv ? 3 : 1;
      const Attribute* group = node.attribute("group");
      if ((conv || qconv) && node.inputs.size() > weights && graph.values[node.inputs[weights]].is_constant()) {
        const Value& w = graph.values[node.inputs[weights]];
        const int64_t m = w.shape[0].value, cg = w.shape[1].value, kh = w.shape[2].value, kw = w.shape[3].value;
        const bool depthwise = group && group->i > 1 && cg == 1 && group->i == m;
        if (!depthwise) {
          const size_t element = edgert_dtype_size(w.dtype);
          auto data = std::make_shared<std::vector<uint8_t>>(w.data->size());
          for (int64_t o = 0; o < m; ++o)
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t y = 0; y < kh; ++y)
                for (int64_t x = 0; x < kw; ++x)
                  std::memcpy(data->data() + (((o * kh + y) * kw + x) * cg + c) * element,
                              w.data->data() + (((o * cg + c) * kh + y) * kw + x) * element, element);
          Value krsc = w;
          krsc.name += ":krsc";
          krsc.data = data;
          krsc.shape = {w.shape[0], w.shape[2], w.shape[3], w.shape[1]};
          node.inputs[weights] = graph.add_value(std::move(krsc));
          stored_nhwc.resize(graph.values.size(), false);
        }
      }
      for (int32_t t : node.outputs)
        if (rank4_activation(t)) stored_nhwc[t] = true;
      ++converted;
    }
    nodes.push_back(std::move(node));
  }
  // Engine outputs leave in the caller's layout.
  for (int32_t& t : graph.outputs)
    if (rank4_activation(t) && stored_nhwc[t] && !same_bytes(t)) {
      const std::string name = graph.values[t].name;
      const int32_t r = reformat(t, false);
      // The engine output keeps its name: swap names so the NCHW copy is the one called that.
      graph.values[r].name = name;
      graph.values[t].name = name + ":nhwc";
      t = r;
    }
  graph.nodes = std::move(nodes);
  if (options.log)
    options.log("layout: " + std::to_string(converted) + " device nodes channels-last (NHWC), " +
                std::to_string(reformats) + " Reformat nodes where layouts meet");
  return converted;
}

int fuse_int8_residual_adds(Model& model, const PlacementOptions& options) {
  Graph& graph = model.graphs[0];
  const std::string device_plugin = device_plugin_of(graph);
  if (device_plugin.empty()) return 0;
  const LoadedPlugin* plugin = plugin_named(options, device_plugin);
  std::vector<int> readers(graph.values.size(), 0);
  std::vector<bool> is_output(graph.values.size(), false);
  std::map<int32_t, size_t> producer;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int32_t t : graph.nodes[n].inputs)
      if (t >= 0) ++readers[t];
    for (int32_t t : graph.nodes[n].outputs) producer[t] = n;
  }
  for (int32_t t : graph.outputs) is_output[t] = true;
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused_count = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& add = graph.nodes[n];
    if (!add.on_device || add.domain != "com.microsoft" || add.op_type != "QLinearAdd" || add.inputs.size() < 7)
      continue;
    for (size_t side : {size_t{0}, size_t{3}}) {
      const int32_t t = add.inputs[side];
      const auto it = producer.find(t);
      if (it == producer.end() || removed[it->second]) continue;
      const Node& conv = graph.nodes[it->second];
      if (!conv.on_device || !conv.domain.empty() || conv.op_type != "QLinearConv" || readers[t] != 1 || is_output[t])
        continue;
      const size_t other = side == 0 ? 3 : 0;
      if (!graph.values[add.inputs[other]].same_shape_as(graph.values[t])) continue;
      Node fused = conv;
      fused.name = conv.name + " + " + add.name;
      fused.domain = "edgert";
      fused.op_type = "QLinearConvAdd";
      fused.opset = 1;
      fused.inputs.resize(9, -1);  // the bias may be absent
      for (size_t i = other; i < other + 3; ++i) fused.inputs.push_back(i < add.inputs.size() ? add.inputs[i] : -1);
      fused.inputs.push_back(add.inputs[6]);
      fused.inputs.push_back(add.inputs.size() > 7 ? add.inputs[7] : -1);
      fused.outputs = add.outputs;
      if (!kernel_in(*plugin, graph, fused)) continue;
      // At the add's place: the residual may be computed after the convolution.
      graph.nodes[n] = std::move(fused);
      removed[it->second] = true;
      ++fused_count;
      break;
    }
  }
  std::vector<Node> nodes;
  for (size_t n = 0; n < graph.nodes.size(); ++n)
    if (!removed[n]) nodes.push_back(std::move(graph.nodes[n]));
  graph.nodes = std::move(nodes);
  if (options.log && fused_count)
    options.log("int8: " + std::to_string(fused_count) + " residual add(s) fused into the convolution before them");
  return fused_count;
}

int assign_memory_spaces(Model& model, const PlacementOptions& options) {
  Graph& graph = model.graphs[0];
  bool any_device = false;
  for (const Node& node : graph.nodes) any_device = any_device || node.on_device;
  for (Value& v : graph.values) v.space = EDGERT_MEMORY_HOST;
  if (!any_device) return 0;

  // Who reads each value where: a device kernel reads on the device except its host operands.
  std::vector<bool> read_on_device(graph.values.size(), false), read_on_host(graph.values.size(), false);
  std::vector<bool> read_by_subgraph(graph.values.size(), false);
  for (const Node& node : graph.nodes) {
    const LoadedPlugin* plugin = node.on_device ? plugin_named(options, node.plugin) : nullptr;
    const edgert_kernel* kernel = plugin ? kernel_in(*plugin, graph, node) : nullptr;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int32_t t = node.inputs[i];
      if (t < 0) continue;
      const bool host_operand = kernel && i < 64 && ((kernel->host_inputs >> i) & 1u);
      (node.on_device && !host_operand ? read_on_device : read_on_host)[t] = true;
    }
    // A subgraph reads outer values by name, on the host.
    for (const Attribute& a : node.attributes)
      if (a.graph >= 0) {
        std::set<std::string> names;
        outer_names(model, a.graph, names);
        for (size_t t = 0; t < graph.values.size(); ++t)
          if (names.count(graph.values[t].name)) read_on_host[t] = read_by_subgraph[t] = true;
      }
  }
  std::vector<bool> written_on_device(graph.values.size(), false), is_input(graph.values.size(), false);
  for (const Node& node : graph.nodes)
    for (int32_t t : node.outputs) written_on_device[t] = node.on_device;
  for (int32_t t : graph.inputs) is_input[t] = true;

  // Discrete devices: one copy per value and direction, read by every reader on the other side.
  std::map<int32_t, int32_t> copy_of;
  std::vector<std::vector<std::pair<size_t, int32_t>>> copies_before(graph.nodes.size());  // node -> (from, to)
  int copies = 0;
  auto copy_for = [&](int32_t t, size_t first_reader, edgert_memory_space space) {
    auto it = copy_of.find(t);
    if (it != copy_of.end()) return it->second;
    Value v = graph.values[t];
    v.name += space == EDGERT_MEMORY_HOST ? ":host" : ":device";
    v.space = space;
    const int32_t c = graph.add_value(std::move(v));
    copies_before[first_reader].emplace_back(t, c);
    ++copies;
    return copy_of[t] = c;
  };
  const edgert_memory_space device_space = EDGERT_MEMORY_DEVICE;
  for (size_t t = 0; t < graph.values.size(); ++t) {
    Value& v = graph.values[t];
    if (v.is_constant()) continue;
    const bool from_device = written_on_device[t];
    const bool host_side = from_device ? read_on_host[t] : true;  // the writer (or the caller) is on the host
    if (is_input[t]) {
      // An engine input lives with its readers; the runtime stages the caller's host memory.
      if (read_on_device[t] && !read_on_host[t]) v.space = device_space;
      else if (read_on_device[t]) v.space = options.unified_memory ? EDGERT_MEMORY_UNIFIED : EDGERT_MEMORY_HOST;
      continue;
    }
    // A subgraph reads an outer value by its name, where no copy node can stand between: on a
    // discrete device too, what the device writes for a subgraph goes to unified memory (the host
    // kernels of the subgraph run after the executor has waited for the device).
    if (from_device)
      v.space = host_side && (options.unified_memory || read_by_subgraph[t]) ? EDGERT_MEMORY_UNIFIED : device_space;
    else if (read_on_device[t] && options.unified_memory) v.space = EDGERT_MEMORY_UNIFIED;
  }
  // Copies where a discrete device and the host meet (unified boards have none).
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& node = graph.nodes[n];
    const LoadedPlugin* plugin = node.on_device ? plugin_named(options, node.plugin) : nullptr;
    const edgert_kernel* kernel = plugin ? kernel_in(*plugin, graph, node) : nullptr;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int32_t t = node.inputs[i];
      if (t < 0 || graph.values[t].is_constant()) continue;
      const bool host_operand = kernel && i < 64 && ((kernel->host_inputs >> i) & 1u);
      const bool wants_device = node.on_device && !host_operand;
      const edgert_memory_space space = graph.values[t].space;
      if (space == EDGERT_MEMORY_UNIFIED) continue;
      if (wants_device && space == EDGERT_MEMORY_HOST) node.inputs[i] = copy_for(t, n, device_space);
      else if (!wants_device && space == EDGERT_MEMORY_DEVICE) node.inputs[i] = copy_for(t, n, EDGERT_MEMORY_HOST);
    }
  }
  if (copies) {
    std::vector<Node> nodes;
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      for (const auto& [from, to] : copies_before[n]) {
        Node copy;
        copy.name = graph.values[from].name + " (to " + (graph.values[to].space == EDGERT_MEMORY_HOST ? "host)" : "device)");
        copy.domain = "edgert";
        copy.op_type = kCopyOp;
        copy.opset = 1;
        copy.inputs = {static_cast<int>(from)};
        copy.outputs = {to};
        copy.plugin = kBuiltinPluginName;
        nodes.push_back(std::move(copy));
      }
      nodes.push_back(std::move(graph.nodes[n]));
    }
    graph.nodes = std::move(nodes);
  }
  if (options.log)
    options.log("memory spaces: " + std::string(options.unified_memory ? "unified memory where host and device meet"
                                                                       : std::to_string(copies) + " copies between host and device"));
  return copies;
}

}  // namespace edgert::builder

// Graph optimization passes over the IR, between import and kernel selection (TensorRT's
// builder optimizations): each pass is a function that edits the main graph and returns how
// many rewrites it made; the PassManager runs them in order, re-infers shapes after a pass
// that changed something, and logs the node count before and after each one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph_rewrite.h"
#include "int8_rewrite.h"
#include "ir.h"
#include "plugin_loader.h"
#include "shape_profiles.h"

namespace edgert::builder {

struct PassContext;

struct PassOptions {
  std::vector<const LoadedPlugin*> plugins;     // kernels for shape inference and folding
  std::function<void(const std::string&)> log;  // -v output; may be empty
  // Constant folding leaves an op alone when one of its outputs would exceed this: a folded
  // tensor is stored in the engine, and a small op making a large tensor (Expand,
  // ConstantOfShape, Tile) is cheaper to run than to store.
  size_t max_folded_bytes = size_t{4} << 20;
  // The build's optimization profiles: shapes are inferred at profile 0's opt and every
  // dimension learns whether it varies (shape_profiles.h). Empty: shapes as the model gives.
  std::vector<ShapeProfile> profiles;
  // The build places nodes on a device: fusions only the CPU plugin runs (a max pool, a channel
  // scale or a 1x1 expansion folded into a convolution) are left out, or they would pull those
  // convolutions off the device.
  bool target_device = false;
  // The device layers run in float16 (--fp16).
  bool device_fp16 = false;
  // Runs after pattern recognition, before the fusions (empty: none): the INT8 rewrite, or the
  // calibration build's exposure of every activation as an output, on the graph whose tensor
  // names the calibration cache records.
  std::function<int(PassContext&)> precision;
  // Filled by the Q/DQ folding pass with the quantization of each activation a
  // QuantizeLinear -> DequantizeLinear pair carried (null: pairs are left in the graph).
  std::shared_ptr<QuantizationTable> explicit_quantization;
  // The pipeline ends with the precision pass (edgert quantize exports the graph there).
  bool stop_after_precision = false;
};

// What a pass works on. `pinned` marks values a pass must neither remove nor rename (see
// pinned_values); it is recomputed before every pass.
struct PassContext {
  Model& model;
  Graph& graph;  // the main graph; subgraphs of If/Loop/Scan are left as imported
  const PassOptions& options;
  std::vector<bool> pinned;
};

using PassFunction = std::function<int(PassContext&)>;

struct PassReport {
  std::string name;
  size_t nodes_before = 0, nodes_after = 0;
  int rewrites = 0;
};

class PassManager {
 public:
  explicit PassManager(PassOptions options) : options_(std::move(options)) {}
  void add(std::string name, PassFunction pass) { passes_.push_back({std::move(name), std::move(pass)}); }
  // Runs every pass once, in order, on model.graphs[0].
  std::vector<PassReport> run(Model& model) const;

  // The builder's pipeline: folding and clean-up first so the fusions see the simplest graph.
  static PassManager standard(PassOptions options);

 private:
  PassOptions options_;
  std::vector<std::pair<std::string, PassFunction>> passes_;
};

// Fills dtypes and shapes of the main graph's values by asking each node's kernel, as kernel
// selection does; nodes no plugin supports are left for selection to report. Small integer
// values computable from constants and static shapes (a Shape -> Gather -> Concat chain that
// feeds a Reshape) are computed on the way, so what reads them gets a shape too, and dropped
// again at the end: folding them is constant folding's decision.
void infer_shapes(Graph& graph, const std::vector<const LoadedPlugin*>& plugins);

// True when every input of `node` is a constant, or the node is Shape/Size of a value whose
// shape is fixed (static at the current specialization, with `shapes_at_specialization`).
bool computable_from_constants(const Graph& graph, const Node& node, bool shapes_at_specialization);
// Runs `node` with its kernel and stores its outputs as constant data (values and shapes);
// false when it cannot run or an output would exceed `max_bytes`. constant_folding.cpp.
bool compute_node_outputs(Graph& graph, Node& node, const std::vector<const LoadedPlugin*>& plugins, size_t max_bytes);

// The passes, one file each.
int eliminate_identities(PassContext& context);      // identity_elimination.cpp
int fold_constants(PassContext& context);            // constant_folding.cpp
int eliminate_dead_code(PassContext& context);       // dead_code.cpp
int eliminate_common_subexpressions(PassContext& context);  // common_subexpression.cpp
int fold_batchnorm(PassContext& context);            // batchnorm_folding.cpp
int fold_qdq_pairs(PassContext& context);            // qdq_folding.cpp
int eliminate_shuffles(PassContext& context);        // shuffle_elimination.cpp
int recognize_patterns(PassContext& context);        // pattern_recognition.cpp
int fuse_activations(PassContext& context);          // activation_fusion.cpp
int fuse_pointwise_chains(PassContext& context);     // pointwise_fusion.cpp
int fuse_max_pools(PassContext& context);            // pool_fusion.cpp
int fuse_channel_scales(PassContext& context);       // channel_scale_fusion.cpp
int fuse_expand_depthwise(PassContext& context);     // expand_depthwise_fusion.cpp
int fuse_attention(PassContext& context);            // attention_fusion.cpp

// The domain of the fused ops the CPU plugin implements (FusedConv, FusedGemm, FusedMatMul,
// PointwiseChain); see plugins/cpu/activation.h for their attributes.
constexpr const char* kFusedDomain = "edgert";

// The edits a rewrite of rewrite_nodes makes, through which the uses stay current: the fusions
// used to rebuild them after every rewrite, a walk of the whole graph per fusion.
class NodeEdits {
 public:
  NodeEdits(Graph& graph, ValueUses& uses) : graph_(graph), uses_(uses), dead_(graph.nodes.size(), false) {}
  // True for a node a rewrite absorbed; it stays, emptied, until the pass ends.
  bool dead(int32_t node) const { return dead_[node]; }
  // Marks `node` dead and empties it, so it no longer reads or writes anything.
  void absorb(int32_t node);
  // Node `node` becomes `replacement` (and is alive, should it have been absorbed before).
  void replace(int32_t node, Node replacement);
  const std::vector<bool>& dead_nodes() const { return dead_; }

 private:
  Graph& graph_;
  ValueUses& uses_;
  std::vector<bool> dead_;
};

// The fusions' loop: rewrite(uses, n, edits) for every node n not yet dead, in graph order; a
// rewrite that returns true has made its edits through `edits` (the uses follow them). The
// dead nodes are removed at the end. Returns the rewrites made.
int rewrite_nodes(PassContext& context,
                  const std::function<bool(const ValueUses& uses, int32_t node, NodeEdits& edits)>& rewrite);

// A Conv node as the edgert.FusedConv computing the same: no activation, no residual yet.
Node fused_conv_of(const Node& conv);

// A two-node fusion's edit: node `into` becomes `fused`; node `absorbed` is marked dead and
// emptied (rewrite_nodes removes it). Returns true, a rewrite's result.
bool replace_pair(NodeEdits& edits, int32_t absorbed, int32_t into, Node fused);

// The dims of a value with a static shape (false otherwise).
bool static_dims(const Value& v, std::vector<int64_t>& dims);
// Every value of an INTS attribute equals `value` (true when the attribute is absent).
bool ints_equal(const Attribute* a, int64_t value);
// A Conv, or a FusedConv without a pool, that is 1x1 with stride 1, no pads and group 1 (it may
// have a residual or a channel scale: check its inputs).
bool pointwise_conv(const Graph& graph, const Node& conv);

}  // namespace edgert::builder

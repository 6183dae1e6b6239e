// Conv (or FusedConv without a residual) -> MaxPool  becomes one edgert.FusedConv whose pool_*
// attributes describe the pool. The stems of classic CNNs (squeezenet, resnet: conv + relu, then
// a 3x3 stride-2 max pool) write a 3 MB activation that the pool reads straight back; fused, the
// CPU plugin computes the convolution a band of rows at a time into a cache-sized buffer and
// pools it there, so that tensor never goes to memory. Max is exact, so results are
// bit-identical to the two ops.
//
// The pool: 2-D, no Indices output, no dilation, explicit pads (auto_pad NOTSET), ceil_mode as
// given. The convolution's output must have the pool as its only reader and not be an engine
// output. The fused node takes the pool's place.
#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

bool all_ones(const Attribute* a) {
  if (!a) return true;
  for (int64_t v : a->ints)
    if (v != 1) return false;
  return true;
}

// The MaxPool attributes the fused kernel takes, or false when this pool is not one it runs.
bool fusable_pool(const Node& pool, std::vector<Attribute>& out) {
  if (!is_op(pool, "MaxPool") || pool.inputs.size() != 1 || pool.outputs.size() != 1) return false;
  const Attribute* kernel = pool.attribute("kernel_shape");
  if (!kernel || kernel->ints.size() != 2 || !all_ones(pool.attribute("dilations"))) return false;
  const Attribute* auto_pad = pool.attribute("auto_pad");
  if (auto_pad && auto_pad->s != "NOTSET") return false;
  const Attribute* strides = pool.attribute("strides");
  const Attribute* pads = pool.attribute("pads");
  const Attribute* ceil_mode = pool.attribute("ceil_mode");
  if ((strides && strides->ints.size() != 2) || (pads && pads->ints.size() != 4)) return false;
  out.push_back(ints_attribute("pool_kernel_shape", kernel->ints));
  out.push_back(ints_attribute("pool_strides", strides ? strides->ints : std::vector<int64_t>{1, 1}));
  out.push_back(ints_attribute("pool_pads", pads ? pads->ints : std::vector<int64_t>{0, 0, 0, 0}));
  Attribute ceil;
  ceil.name = "pool_ceil_mode";
  ceil.type = EDGERT_ATTR_INT;
  ceil.i = ceil_mode ? ceil_mode->i : 0;
  out.push_back(ceil);
  return true;
}

bool fuse_pool_into(PassContext& context, const ValueUses& uses, int32_t p, NodeEdits& edits) {
  Graph& graph = context.graph;
  const Node& producer = graph.nodes[p];
  const bool conv = is_op(producer, "Conv");
  const bool fused_conv = producer.domain == kFusedDomain && producer.op_type == "FusedConv";
  if (!(conv || fused_conv) || producer.outputs.size() != 1 || producer.inputs.size() < 2) return false;
  if (fused_conv && (producer.inputs.size() > 3 || producer.attribute("pool_kernel_shape"))) return false;
  const int32_t y = producer.outputs[0];
  const Value& w = graph.values[producer.inputs[1]];
  if (context.pinned[y] || graph.values[y].dtype != EDGERT_DTYPE_FLOAT32 || !w.rank_known || w.shape.size() != 4)
    return false;
  const int32_t reader = uses.sole_reader(y);
  if (reader < 0 || edits.dead(reader)) return false;
  const Node& pool = graph.nodes[reader];
  std::vector<Attribute> pool_attributes;
  if (!fusable_pool(pool, pool_attributes)) return false;

  Node fused = conv ? fused_conv_of(producer) : producer;
  for (Attribute& a : pool_attributes) fused.set_attribute(std::move(a));
  fused.name = fused_name(producer.name, pool.name);
  fused.outputs = {pool.outputs[0]};
  return replace_pair(edits, p, reader, std::move(fused));
}

}  // namespace

int fuse_max_pools(PassContext& context) {
  return rewrite_nodes(context, [&](const ValueUses& uses, int32_t n, NodeEdits& edits) {
    return fuse_pool_into(context, uses, n, edits);
  });
}

}  // namespace edgert::builder

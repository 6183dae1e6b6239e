#include "cpu_reduced_precision.h"

namespace edgert::builder {

namespace {

bool is_float_convolution(const Node& node) {
  return (node.op_type == "Conv" || node.op_type == "FusedConv") && !node.on_device;
}

void set_flag(Node& node, const char* name) {
  Attribute a;
  a.name = name;
  a.type = EDGERT_ATTR_INT;
  a.i = 1;
  node.set_attribute(a);
}

bool flag(const Node& node, const char* name) {
  const Attribute* a = node.attribute(name);
  return a && a->type == EDGERT_ATTR_INT && a->i != 0;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

int allow_cpu_reduced_precision(Model& model, bool bf16, bool fp16, int32_t float32_prefix) {
  if (!bf16 && !fp16) return 0;
  int eligible = 0;
  for (Node& node : model.graphs[0].nodes) {
    if (!is_float_convolution(node)) continue;
    if (eligible++ < float32_prefix) {
      node.precision_note = "float32: kept by the accuracy check";
      continue;
    }
    if (bf16) set_flag(node, kAllowBf16Attribute);
    if (fp16) set_flag(node, kAllowFp16Attribute);
  }
  return eligible;
}

void note_cpu_reduced_precision(Model& model, bool timed) {
  const std::string why = timed ? "timed faster than float32" : "the tuner's choice, not timed here";
  for (Node& node : model.graphs[0].nodes) {
    const bool bf16 = flag(node, kAllowBf16Attribute), fp16 = flag(node, kAllowFp16Attribute);
    if (!bf16 && !fp16) continue;
    // The CPU plugin names its tactics by the type their products are computed in.
    if (starts_with(node.tactic_name, "bf16-")) {
      node.precision_note = "bfloat16 (--bf16, " + why + ")";
    } else if (starts_with(node.tactic_name, "f16-")) {
      node.precision_note = "float16 (--fp16, " + why + ")";
    } else {
      const std::string allowed = bf16 && fp16 ? "--bf16/--fp16" : bf16 ? "--bf16" : "--fp16";
      node.precision_note = "float32 (" + allowed + ": " + (timed ? "float32 timed faster" : "not timed here") +
                            ", or no " + (bf16 ? "bfloat16" : "float16") + " kernel for this shape)";
    }
  }
}

}  // namespace edgert::builder

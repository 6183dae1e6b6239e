#include "onnx_schema_check.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>

#include "build_error.h"

namespace edgert::builder {
namespace {

// ai.onnx: the newest opset whose changes the importer and the CPU plugin's kernels were written
// against (Reduce* axes as inputs and Resize's axes at 18, DFT's axis input at 20, the types
// QuantizeLinear gained at 21). Opsets 22 to 27 (ONNX 1.17 to 1.22) changed no existing op's
// meaning: they widened type lists (bfloat16 at 22, float4 at 23, float8e8m0 at 24) and added
// ops (Attention, RMSNormalization, RotaryEmbedding, Swish, TensorScatter, BitCast, CumProd,
// FlexAttention, LinearAttention, CausalConvWithState), which a plugin runs or refuses by name
// like any op; the ONNX 1.22 node tests check each op at its newest version. libonnx's schemas
// stop at its own release (17 for 1.12), so that is not the limit; a newer opset may change an
// op's meaning and is refused rather than run with the older meaning.
constexpr int64_t kNewestDefaultOpset = 27;
// ai.onnx.ml 5 (ONNX 1.15) added TreeEnsemble, which the CPU plugin runs.
constexpr int64_t kNewestMlOpset = 5;

// The newest version of each domain libonnx has schemas for.
const std::map<std::string, int64_t>& registry_newest() {
  static const std::map<std::string, int64_t> newest = [] {
    std::map<std::string, int64_t> m;
    for (const auto& [domain, range] : onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map())
      m[domain] = range.second;
    return m;
  }();
  return newest;
}

std::string pretty_domain(const std::string& domain) { return domain.empty() ? "ai.onnx" : domain; }

std::string plural(int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

// "X, W" for the formal parameters [from, to) of a schema's list.
std::string formal_names(const std::vector<onnx::OpSchema::FormalParameter>& formals, int from, int to) {
  std::string names;
  for (int i = from; i < to && i < static_cast<int>(formals.size()); ++i)
    names += (names.empty() ? "" : ", ") + formals[i].GetName();
  return names;
}

}  // namespace

void check_opset_imports(const std::map<std::string, int64_t>& opsets) {
  // The ONNX domains: ai.onnx up to kNewestDefaultOpset, the others as far as libonnx's schemas
  // go. Other domains are not ONNX's to version.
  std::map<std::string, int64_t> known = registry_newest();
  known[""] = std::max(known[""], kNewestDefaultOpset);
  known["ai.onnx.ml"] = std::max(known["ai.onnx.ml"], kNewestMlOpset);
  for (const auto& [domain, version] : opsets) {
    auto it = known.find(domain);
    if (it == known.end()) continue;
    if (version < 1 || version > it->second)
      build_fail(EDGERT_ERR_UNSUPPORTED,
                 "the model imports opset %lld of domain '%s'; edgert knows versions 1 to %lld of it (re-export the "
                 "model at opset %lld or lower)",
                 static_cast<long long>(version), pretty_domain(domain).c_str(), static_cast<long long>(it->second),
                 static_cast<long long>(it->second));
  }
}

void check_node_arity(const onnx::NodeProto& node, const std::string& domain, int64_t opset,
                      const std::string& label) {
  const std::string& op = node.op_type();
  const std::string where = "node '" + label + "' (" + (domain.empty() ? "" : domain + ".") + op + ")";
  // Every ONNX op has an output; a node without one hands kernels an empty output list.
  if (node.output_size() == 0)
    build_fail(EDGERT_ERR_FORMAT, "%s has no outputs; every node must produce at least one", where.c_str());
  // Ops newer than libonnx, and other domains' ops, are for plugins to judge.
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, static_cast<int>(opset), domain);
  if (!schema || schema->deprecated()) return;
  // Past libonnx's newest opset the schema is an older version's: an input or output may have
  // been added since, so only the output minimums (which have not grown in any ONNX release)
  // hold; an input may have become optional since (OptionalHasElement's at opset 18), so inputs
  // are left to the kernels.
  auto newest = registry_newest().find(domain);
  const bool exact = newest != registry_newest().end() && opset <= newest->second;

  const int inputs = node.input_size(), outputs = node.output_size();
  const auto& formal_in = schema->inputs();
  if (exact && inputs < schema->min_input())
    build_fail(EDGERT_ERR_FORMAT, "%s has %s; %s opset %lld needs at least %d (missing: %s)", where.c_str(),
               plural(inputs, "input").c_str(), op.c_str(), static_cast<long long>(opset), schema->min_input(),
               formal_names(formal_in, inputs, schema->min_input()).c_str());
  if (exact && inputs > schema->max_input())
    build_fail(EDGERT_ERR_FORMAT, "%s has %s; %s opset %lld takes at most %d", where.c_str(),
               plural(inputs, "input").c_str(), op.c_str(), static_cast<long long>(opset), schema->max_input());
  for (int i = 0; i < inputs && i < static_cast<int>(formal_in.size()); ++i)
    if (exact && node.input(i).empty() && formal_in[i].GetOption() == onnx::OpSchema::Single)
      build_fail(EDGERT_ERR_FORMAT, "%s leaves input %d (%s) empty; %s requires it", where.c_str(), i,
                 formal_in[i].GetName().c_str(), op.c_str());
  if (outputs < schema->min_output())
    build_fail(EDGERT_ERR_FORMAT, "%s has %s; %s opset %lld needs at least %d (missing: %s)", where.c_str(),
               plural(outputs, "output").c_str(), op.c_str(), static_cast<long long>(opset), schema->min_output(),
               formal_names(schema->outputs(), outputs, schema->min_output()).c_str());
  if (exact && outputs > schema->max_output())
    build_fail(EDGERT_ERR_FORMAT, "%s has %s; %s opset %lld gives at most %d", where.c_str(),
               plural(outputs, "output").c_str(), op.c_str(), static_cast<long long>(opset), schema->max_output());
}

}  // namespace edgert::builder

// The basics of ONNX's classic machine-learning domain (ai.onnx.ml) that exported scikit-learn
// pipelines use around a model: Binarizer, ArrayFeatureExtractor and TreeEnsemble (ml opset 5,
// the one op that replaced the tree regressor and classifier). Plain loops: these models are
// small, and their time goes to the networks beside them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "kernel.h"

namespace edgert::cpu {
namespace {

constexpr const char* kMlDomain = "ai.onnx.ml";

// Y = X > threshold ? 1 : 0, in X's dtype.
class BinarizerOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const float threshold = Attributes(&node).get_float("threshold", 0.0f);
    dispatch_only<kFloats | kSigned>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      for (int64_t i = 0, n = numel(in[0]); i < n; ++i)
        y[i] = static_cast<C>(x[i]) > static_cast<C>(threshold) ? T(C(1)) : T(C(0));
    }, "X");
  }
};

// Z = X[..., indices] with the indices flattened; a 1-D X gives a [1, count] Z (as ONNX Runtime).
class ArrayFeatureExtractorOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (in[0].rank < 1) fail(EDGERT_ERR_SHAPE, "X must have rank 1 or more");
    if (in[1].dtype != EDGERT_DTYPE_INT64) fail(EDGERT_ERR_SHAPE, "Y has dtype %s, expected int64", dtype_name(in[1].dtype));
    Shape shape = shape_of(in[0]);
    if (shape.size() == 1) shape.insert(shape.begin(), 1);
    shape.back() = numel(in[1]);
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const int64_t last = in[0].dims[in[0].rank - 1];
    const int64_t rows = last ? numel(in[0]) / last : 0;
    const int64_t count = numel(in[1]);
    const int64_t* index = data_as<int64_t>(in[1]);
    for (int64_t k = 0; k < count; ++k)
      if (index[k] < 0 || index[k] >= last)
        fail(EDGERT_ERR_SHAPE, "index %lld is outside X's last axis of %lld", static_cast<long long>(index[k]),
             static_cast<long long>(last));
    const size_t size = dtype_size(in[0].dtype);
    const uint8_t* x = data_as<uint8_t>(in[0]);
    uint8_t* z = data_as<uint8_t>(out[0]);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < count; ++k)
        std::memcpy(z + (r * count + k) * size, x + (r * last + index[k]) * size, size);
  }
};

// How a node compares the feature with its split (TreeEnsemble's nodes_modes).
enum class SplitMode : uint8_t { kLeq = 0, kLt = 1, kGte = 2, kGt = 3, kEq = 4, kNeq = 5, kMember = 6 };
enum class Aggregate : int64_t { kAverage = 0, kSum = 1, kMin = 2, kMax = 3 };

// The ensemble's arrays, read once per prepare from the attributes.
struct Trees {
  std::vector<int64_t> feature, true_id, false_id, true_leaf, false_leaf, missing_true, roots, leaf_target;
  std::vector<double> split, leaf_weight;
  std::vector<SplitMode> mode;
  std::vector<std::set<double>> members;  // per node; the set of a member node
  int64_t targets = 1;
  Aggregate aggregate = Aggregate::kSum;
};

std::vector<double> doubles_of(const edgert_tensor* t, const char* what) {
  if (!t) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' is required", what);
  std::vector<double> v(static_cast<size_t>(numel(*t)));
  dispatch_only<kFloats>(t->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<compute_t<T>>(data_as<T>(*t)[i]));
  }, what);
  return v;
}

Trees read_trees(const edgert_node& node) {
  Attributes a(&node);
  Trees t;
  t.feature = a.get_ints("nodes_featureids");
  t.true_id = a.get_ints("nodes_truenodeids");
  t.false_id = a.get_ints("nodes_falsenodeids");
  t.true_leaf = a.get_ints("nodes_trueleafs");
  t.false_leaf = a.get_ints("nodes_falseleafs");
  t.missing_true = a.get_ints("nodes_missing_value_tracks_true");
  t.roots = a.get_ints("tree_roots");
  t.leaf_target = a.get_ints("leaf_targetids");
  t.split = doubles_of(a.get_tensor("nodes_splits"), "nodes_splits");
  t.leaf_weight = doubles_of(a.get_tensor("leaf_weights"), "leaf_weights");
  t.targets = a.get_int("n_targets", 1);
  t.aggregate = static_cast<Aggregate>(a.get_int("aggregate_function", 1));
  if (a.get_int("post_transform", 0) != 0)
    fail(EDGERT_ERR_UNSUPPORTED, "post_transform %lld is not supported (only 0, none)",
         static_cast<long long>(a.get_int("post_transform", 0)));
  if (static_cast<int64_t>(t.aggregate) < 0 || static_cast<int64_t>(t.aggregate) > 3)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "aggregate_function %lld is none of 0-3", static_cast<long long>(t.aggregate));
  const edgert_tensor* modes = a.get_tensor("nodes_modes");
  if (!modes || modes->dtype != EDGERT_DTYPE_UINT8) fail(EDGERT_ERR_INVALID_ARGUMENT, "nodes_modes must be a uint8 tensor");
  const size_t n = t.feature.size();
  for (const auto* list : {&t.true_id, &t.false_id, &t.true_leaf, &t.false_leaf})
    if (list->size() != n) fail(EDGERT_ERR_INVALID_ARGUMENT, "the nodes_* attributes differ in length");
  if (t.split.size() != n || static_cast<size_t>(numel(*modes)) != n)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "nodes_splits and nodes_modes must have one entry per node");
  if (t.leaf_target.size() != t.leaf_weight.size())
    fail(EDGERT_ERR_INVALID_ARGUMENT, "leaf_targetids and leaf_weights differ in length");
  for (int64_t id : t.leaf_target)
    if (id < 0 || id >= t.targets) fail(EDGERT_ERR_INVALID_ARGUMENT, "leaf target %lld is outside n_targets", static_cast<long long>(id));
  t.mode.resize(n);
  t.members.resize(n);
  // Member nodes take their sets from membership_values in node order, each ended by a NaN.
  std::vector<double> members;
  if (const edgert_tensor* m = a.get_tensor("membership_values")) members = doubles_of(m, "membership_values");
  size_t next_member = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t m = data_as<uint8_t>(*modes)[i];
    if (m > 6) fail(EDGERT_ERR_INVALID_ARGUMENT, "node %zu has mode %u, none of 0-6", i, m);
    t.mode[i] = static_cast<SplitMode>(m);
    if (t.mode[i] != SplitMode::kMember) continue;
    for (; next_member < members.size() && !std::isnan(members[next_member]); ++next_member)
      t.members[i].insert(members[next_member]);
    if (next_member >= members.size()) fail(EDGERT_ERR_INVALID_ARGUMENT, "membership_values ends before node %zu's set", i);
    ++next_member;  // the NaN
  }
  return t;
}

bool goes_true(const Trees& t, size_t node, double x) {
  if (std::isnan(x) && node < t.missing_true.size() && t.missing_true[node]) return true;
  const double s = t.split[node];
  switch (t.mode[node]) {
    case SplitMode::kLeq: return x <= s;
    case SplitMode::kLt: return x < s;
    case SplitMode::kGte: return x >= s;
    case SplitMode::kGt: return x > s;
    case SplitMode::kEq: return x == s;
    case SplitMode::kNeq: return x != s;
    case SplitMode::kMember: return t.members[node].count(x) > 0;
  }
  return false;
}

// The leaf one row reaches from `root` (a root that is its own leaf: both branches the same leaf).
size_t leaf_of(const Trees& t, int64_t root, const double* row, int64_t features) {
  const size_t n = t.feature.size();
  int64_t node = root;
  if (node < 0 || static_cast<size_t>(node) >= n) fail(EDGERT_ERR_INVALID_ARGUMENT, "tree root %lld is no node", static_cast<long long>(node));
  if (t.true_leaf[node] && t.false_leaf[node] && t.true_id[node] == t.false_id[node]) return static_cast<size_t>(node);
  for (size_t steps = 0; steps <= n; ++steps) {
    const int64_t f = t.feature[node];
    if (f < 0 || f >= features) fail(EDGERT_ERR_SHAPE, "node %lld reads feature %lld of %lld", static_cast<long long>(node),
                                     static_cast<long long>(f), static_cast<long long>(features));
    const bool yes = goes_true(t, static_cast<size_t>(node), row[f]);
    const int64_t next = yes ? t.true_id[node] : t.false_id[node];
    if (yes ? t.true_leaf[node] : t.false_leaf[node]) {
      if (next < 0 || static_cast<size_t>(next) >= t.leaf_weight.size()) fail(EDGERT_ERR_INVALID_ARGUMENT, "leaf %lld does not exist", static_cast<long long>(next));
      return static_cast<size_t>(next);
    }
    if (next < 0 || static_cast<size_t>(next) >= n) fail(EDGERT_ERR_INVALID_ARGUMENT, "node %lld does not exist", static_cast<long long>(next));
    node = next;
  }
  fail(EDGERT_ERR_INVALID_ARGUMENT, "tree at root %lld has a cycle", static_cast<long long>(root));
}

class TreeEnsembleOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (in[0].rank != 2) fail(EDGERT_ERR_SHAPE, "X must be 2-D [rows, features], got %s", shape_string(shape_of(in[0])).c_str());
    trees_ = read_trees(node);
    set_output(out[0], in[0].dtype, {in[0].dims[0], trees_.targets});
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const int64_t rows = in[0].dims[0], features = in[0].dims[1], targets = trees_.targets;
    dispatch_only<kFloats>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      std::vector<double> row(static_cast<size_t>(features)), result(static_cast<size_t>(targets));
      const double start = trees_.aggregate == Aggregate::kMin   ? static_cast<double>(std::numeric_limits<compute_t<T>>::max())
                           : trees_.aggregate == Aggregate::kMax ? static_cast<double>(std::numeric_limits<compute_t<T>>::lowest())
                                                                 : 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t f = 0; f < features; ++f) row[f] = static_cast<double>(static_cast<compute_t<T>>(x[r * features + f]));
        std::fill(result.begin(), result.end(), start);
        for (int64_t root : trees_.roots) {
          const size_t leaf = leaf_of(trees_, root, row.data(), features);
          double& slot = result[static_cast<size_t>(trees_.leaf_target[leaf])];
          const double w = trees_.leaf_weight[leaf];
          switch (trees_.aggregate) {
            case Aggregate::kSum: slot += w; break;
            case Aggregate::kAverage: slot += w / static_cast<double>(trees_.roots.size()); break;
            case Aggregate::kMin: slot = std::min(slot, w); break;
            case Aggregate::kMax: slot = std::max(slot, w); break;
          }
        }
        for (int64_t k = 0; k < targets; ++k) y[r * targets + k] = static_cast<T>(static_cast<compute_t<T>>(result[k]));
      }
    }, "X");
  }

 private:
  Trees trees_;
};

}  // namespace

void register_ml_kernels(KernelRegistry& r) {
  r.add_in_domain<BinarizerOp>(kMlDomain, "Binarizer", "ref-binarizer");
  r.add_in_domain<ArrayFeatureExtractorOp>(kMlDomain, "ArrayFeatureExtractor", "ref-array-feature-extractor");
  r.add_in_domain<TreeEnsembleOp>(kMlDomain, "TreeEnsemble", "ref-tree-ensemble");
}

}  // namespace edgert::cpu

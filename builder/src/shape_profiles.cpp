#include "shape_profiles.h"

#include <algorithm>

#include "build_error.h"
#include "passes/pass_manager.h"

namespace edgert::builder {
namespace {

const Value* find_input(const Graph& graph, const std::string& name) {
  for (int32_t t : graph.inputs)
    if (graph.values[t].name == name) return &graph.values[t];
  return nullptr;
}

std::string input_names(const Graph& graph) {
  std::string names;
  for (int32_t t : graph.inputs) names += (names.empty() ? "" : ", ") + graph.values[t].name;
  return names;
}

bool has_dynamic_dim(const Value& v) {
  if (!v.rank_known) return true;
  for (const Dim& d : v.shape)
    if (d.value < 0) return true;
  return false;
}

void set_input_dims(Graph& graph, const std::string& name, const std::vector<int64_t>& dims) {
  for (int32_t t : graph.inputs) {
    Value& v = graph.values[t];
    if (v.name != name) continue;
    std::vector<Dim> shape(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      if (d < v.shape.size() && dims.size() == v.shape.size()) shape[d] = v.shape[d];
      shape[d].value = dims[d];
    }
    v.shape = std::move(shape);
    v.rank_known = true;
  }
}

// The shapes of every value, to put back between inference rounds: a node whose outputs
// cannot be inferred (data-dependent) must not keep what another round gave them.
struct ShapeSnapshot {
  std::vector<std::pair<bool, std::vector<Dim>>> shapes;
  explicit ShapeSnapshot(const Graph& graph) {
    for (const Value& v : graph.values) shapes.emplace_back(v.rank_known, v.shape);
  }
  void restore(Graph& graph) const {
    for (size_t i = 0; i < shapes.size() && i < graph.values.size(); ++i) {
      graph.values[i].rank_known = shapes[i].first;
      graph.values[i].shape = shapes[i].second;
    }
  }
};

// Every input at the smallest (or largest) shape any profile accepts.
ShapeProfile bound_profile(const std::vector<ShapeProfile>& profiles, bool largest) {
  ShapeProfile bound;
  for (const ShapeProfile& profile : profiles)
    for (const auto& [name, range] : profile) {
      const std::vector<int64_t>& dims = largest ? range.max : range.min;
      auto [it, fresh] = bound.emplace(name, InputShapeRange{dims, dims, dims});
      if (fresh) continue;
      for (size_t d = 0; d < dims.size() && d < it->second.min.size(); ++d) {
        int64_t& v = it->second.min[d];
        v = largest ? std::max(v, dims[d]) : std::min(v, dims[d]);
        it->second.opt[d] = it->second.max[d] = v;
      }
    }
  return bound;
}

const char* point_name(ProfilePoint point) {
  return point == ProfilePoint::kMin ? "min" : point == ProfilePoint::kOpt ? "opt" : "max";
}

// Inference with the inputs at `profile`'s `point`; a kernel rejecting those shapes is named
// with the shapes it was given.
void infer_at(Graph& graph, const std::vector<const LoadedPlugin*>& plugins, const ShapeProfile& profile,
              ProfilePoint point, const std::string& what) {
  specialize_inputs(graph, profile, point);
  try {
    infer_shapes(graph, plugins);
  } catch (const BuildError& e) {
    std::string shapes;
    for (const auto& [name, range] : profile)
      shapes += (shapes.empty() ? "" : ", ") + name + " " +
                dims_text(point == ProfilePoint::kMin ? range.min : point == ProfilePoint::kOpt ? range.opt : range.max);
    build_fail(e.status(), "at %s (%s): %s", what.c_str(), shapes.c_str(), e.what());
  }
}

}  // namespace

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s + "]";
}

void validate_profiles(const Graph& graph, const std::vector<ShapeProfile>& profiles) {
  for (size_t p = 0; p < profiles.size(); ++p) {
    const std::string which = profiles.size() > 1 ? "profile " + std::to_string(p) + ": " : "";
    for (const auto& [name, range] : profiles[p]) {
      const Value* input = find_input(graph, name);
      if (!input)
        build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%sshape profile names '%s', which is not a model input (inputs: %s)",
                   which.c_str(), name.c_str(), input_names(graph).c_str());
      if (range.min.size() != range.opt.size() || range.opt.size() != range.max.size())
        build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%sinput '%s': min %s, opt %s and max %s shapes must have the same rank",
                   which.c_str(), name.c_str(), dims_text(range.min).c_str(), dims_text(range.opt).c_str(),
                   dims_text(range.max).c_str());
      if (range.min.size() > EDGERT_MAX_RANK)
        build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%sinput '%s': rank %zu is over edgert's limit of %d", which.c_str(),
                   name.c_str(), range.min.size(), EDGERT_MAX_RANK);
      if (input->rank_known && input->shape.size() != range.min.size())
        build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%sinput '%s' has rank %zu; its profile shapes have rank %zu",
                   which.c_str(), name.c_str(), input->shape.size(), range.min.size());
      for (size_t d = 0; d < range.min.size(); ++d) {
        if (range.min[d] < 0 || range.min[d] > range.opt[d] || range.opt[d] > range.max[d])
          build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%sinput '%s': dimension %zu needs min <= opt <= max, got %lld, %lld, %lld",
                     which.c_str(), name.c_str(), d, static_cast<long long>(range.min[d]),
                     static_cast<long long>(range.opt[d]), static_cast<long long>(range.max[d]));
        int64_t fixed = input->rank_known ? input->shape[d].value : -1;
        if (fixed >= 0 && (range.min[d] != fixed || range.max[d] != fixed))
          build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%sinput '%s': dimension %zu is fixed at %lld in the model; the profile "
                     "gives %lld..%lld", which.c_str(), name.c_str(), d, static_cast<long long>(fixed),
                     static_cast<long long>(range.min[d]), static_cast<long long>(range.max[d]));
      }
    }
    // As TensorRT: a profile covers every dynamic input, or the engine could meet shapes no
    // profile was built for.
    std::string missing;
    for (int32_t t : graph.inputs) {
      const Value& v = graph.values[t];
      if (has_dynamic_dim(v) && !profiles[p].count(v.name)) missing += (missing.empty() ? "" : ", ") + v.name;
    }
    if (!missing.empty())
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%sno shapes for dynamic input(s) %s: give each dynamic input "
                 "--min-shapes, --opt-shapes and --max-shapes", which.c_str(), missing.c_str());
  }
}

void specialize_inputs(Graph& graph, const ShapeProfile& profile, ProfilePoint point) {
  for (const auto& [name, range] : profile)
    set_input_dims(graph, name, point == ProfilePoint::kMin ? range.min : point == ProfilePoint::kOpt ? range.opt : range.max);
}

void infer_profile_shapes(Graph& graph, const std::vector<const LoadedPlugin*>& plugins,
                          const std::vector<ShapeProfile>& profiles, size_t profile, ProfilePoint point) {
  if (profiles.empty()) {
    infer_shapes(graph, plugins);
    return;
  }
  const ShapeSnapshot given(graph);
  std::vector<std::vector<int64_t>> low(graph.values.size()), high(graph.values.size());
  auto record = [&](std::vector<std::vector<int64_t>>& into) {
    for (size_t i = 0; i < graph.values.size(); ++i) {
      const Value& v = graph.values[i];
      into[i].clear();
      if (v.rank_known)
        for (const Dim& d : v.shape) into[i].push_back(d.value);
    }
  };
  infer_at(graph, plugins, bound_profile(profiles, false), ProfilePoint::kMin, "the smallest shapes the profiles accept");
  record(low);
  given.restore(graph);
  infer_at(graph, plugins, bound_profile(profiles, true), ProfilePoint::kMax, "the largest shapes the profiles accept");
  record(high);
  given.restore(graph);
  infer_at(graph, plugins, profiles[profile], point,
           std::string("the ") + point_name(point) + " shapes of profile " + std::to_string(profile));
  for (size_t i = 0; i < graph.values.size(); ++i) {
    Value& v = graph.values[i];
    if (!v.rank_known) continue;
    const bool same_rank = low[i].size() == v.shape.size() && high[i].size() == v.shape.size();
    for (size_t d = 0; d < v.shape.size(); ++d) {
      Dim& dim = v.shape[d];
      dim.low = same_rank ? low[i][d] : -1;
      dim.high = same_rank ? high[i][d] : -2;  // rank changes with the shapes: treat as varying
      if (dim.low == dim.high) dim.low = dim.high = -1;  // fixed dims compare equal to constants'
    }
  }
}

void generalize_shapes(Graph& graph) {
  for (Value& v : graph.values)
    for (Dim& d : v.shape)
      if (d.varies()) d.value = -1;
}

}  // namespace edgert::builder

// Optimization profiles at build time (TensorRT's IOptimizationProfile): the ranges of input
// shapes an engine accepts, and how the builder works on a graph whose inputs are dynamic.
//
// A graph with dynamic inputs is specialized: its inputs get the concrete shapes of one point of
// a profile, and shape inference makes every activation static there. The passes, kernel
// selection and tactic timing then see the same graph a static export would give, so fusions
// apply and tactics are timed at the shapes that matter (each profile's opt). Inference at the
// smallest and the largest shapes the profiles accept tells which dimensions vary (Dim::low,
// Dim::high): passes must not bake those into the graph (a folded Shape, a dropped Reshape), the
// memory plan of each profile is made at its max shapes, and the engine stores them as dynamic.
// At run time kernels are prepared again for the shapes they get, with the tactic tuned for the
// profile holding those shapes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine_writer.h"
#include "ir.h"
#include "plugin_loader.h"

namespace edgert::builder {

// One optimization profile: engine input name -> its min/opt/max shapes. Inputs it does not
// name keep the shapes the model declares.
using ShapeProfile = std::map<std::string, InputShapeRange>;

enum class ProfilePoint { kMin, kOpt, kMax };

// Fails (BuildError) unless every profile names real inputs with their rank, keeps the
// model's fixed dimensions and has min <= opt <= max; several profiles name the same inputs.
void validate_profiles(const Graph& graph, const std::vector<ShapeProfile>& profiles);

// Gives the graph inputs named in `profile` their shapes at `point`, keeping dimension names.
void specialize_inputs(Graph& graph, const ShapeProfile& profile, ProfilePoint point);

// Infers the main graph's shapes with its inputs at (profiles[profile], point), and sets every
// dimension's low/high from inference at the smallest and largest accepted shapes. Without
// profiles, plain infer_shapes. A kernel that rejects the shapes at a bound fails the build
// naming that bound.
void infer_profile_shapes(Graph& graph, const std::vector<const LoadedPlugin*>& plugins,
                          const std::vector<ShapeProfile>& profiles, size_t profile, ProfilePoint point);

// Turns every dimension that varies back into a dynamic one (value -1) for the engine file.
void generalize_shapes(Graph& graph);

// "[1x3x224x224]"
std::string dims_text(const std::vector<int64_t>& dims);

}  // namespace edgert::builder

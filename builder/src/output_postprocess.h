// Postprocessing inside the engine (`edgert build --postprocess classification:5|segmentation`):
// nodes appended after the model's output reduce it to the result, so on a GPU board they run
// on the GPU, inside the engine's CUDA graph, and only the result crosses back to the host:
//
//   classification:K  [N, classes] scores -> Softmax (unless the model ends in one) -> TopK K:
//                     outputs "scores" [N, K] float32 (probabilities, best first) and
//                     "classes" [N, K] int64
//   segmentation      [N, classes, H, W] scores -> ArgMax over the classes: output "class_map"
//                     [N, 1, H, W] int64 (a twelfth of the bytes of 21 float planes)
//
// edgertd's classification and segmentation postprocess read these outputs as they are. What
// the engine computes is what edgertd computed on the host from the full scores (the same
// softmax, the lower index first among equal scores, as TopK and ArgMax define it).
#pragma once

#include <string>

#include "ir.h"

namespace edgert::builder {

struct OutputPostprocess {
  std::string type;  // classification | segmentation
  int64_t top_k = 5;  // classification
};

// "classification", "classification:3" or "segmentation"; throws BuildError naming the option.
OutputPostprocess parse_output_postprocess(const std::string& spec);

// Replaces the main graph's single output by the reduced outputs above. Throws BuildError when
// the model has several outputs, or its output is not float32 of the rank the type needs, or K
// exceeds the classes.
void append_output_postprocess(Model& model, const OutputPostprocess& postprocess);

}  // namespace edgert::builder

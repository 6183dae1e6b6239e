// Engine outputs -> a Result's detections and JSON payload, as the pipeline's config asks:
// classification top-k with labels, detection decode (torchvision SSD-style boxes/scores/labels,
// or YOLO-style [1, N, 5 + classes] with NMS), segmentation argmax summary, or raw tensors.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "edgert/types.h"
#include "result.h"

namespace edgert::daemon {

class Postprocessor {
 public:
  // Reads the labels file when one is configured; throws std::runtime_error naming it.
  explicit Postprocessor(const PostprocessConfig& config);
  // `outputs` are the engine's outputs in order, with their names.
  void run(const std::vector<edgert_tensor>& outputs, const std::vector<std::string>& names, int image_width,
           int image_height, Result* result) const;

 private:
  std::string label(int id) const;
  static bool reduced_in_engine(const std::vector<edgert_tensor>& outputs);
  void top_k_from_engine(const edgert_tensor& scores, const edgert_tensor& classes, Result* result) const;
  void classification(const edgert_tensor& scores, Result* result) const;
  void detection(const std::vector<edgert_tensor>& outputs, int image_width, int image_height, Result* result) const;
  void segmentation(const edgert_tensor& scores, Result* result) const;
  void raw(const std::vector<edgert_tensor>& outputs, const std::vector<std::string>& names, Result* result) const;

  PostprocessConfig config_;
  std::vector<std::string> labels_;
};

}  // namespace edgert::daemon

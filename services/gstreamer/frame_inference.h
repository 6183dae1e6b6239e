// One engine run per video frame, the way an edgertd pipeline runs it: the frame goes through
// edgertd's Preprocessor into the engine's float input (or, for a camera engine built with
// `edgert build --camera`, to the engine as it is), the engine runs through libedgert's public
// C++ wrapper, and edgertd's Postprocessor turns its outputs into the result's JSON payload.
// Nothing here knows GStreamer; edgertinfer (edgert_infer.h) drives it from the streaming thread.
//
// Placement is the engine's: plugins are loaded by libedgert with dlopen from the plugin
// directory, so an engine built for a GPU board runs on the CUDA plugin and one built for a CPU
// profile on the CPU plugin, with no code here for either.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "camera_frame_input.h"
#include "config.h"
#include "edgert/edgert.hpp"
#include "frame.h"
#include "postprocess.h"
#include "preprocess.h"
#include "result.h"

namespace edgert::gst {

struct FrameInferenceConfig {
  std::string engine_path;
  // Colon-separated plugin directories; empty: libedgert's own search ($EDGERT_PLUGIN_PATH,
  // the directory beside libedgert, the install directory).
  std::string plugin_dir;
  daemon::PreprocessConfig preprocess;
  daemon::PostprocessConfig postprocess;
};

class FrameInference {
 public:
  // Loads the engine and checks that it takes one image (or camera frame) input. Throws
  // std::runtime_error naming the engine file with libedgert's message, or saying what input
  // the engine has instead.
  explicit FrameInference(const FrameInferenceConfig& config);

  // The raw frames a camera engine takes (format and size); nothing for an engine with a float
  // image input, which takes every format Preprocessor converts, at any size.
  const std::optional<daemon::CameraFrameInput>& camera_input() const { return camera_; }

  // "" when frames of `format` and width x height can go to the engine, else what differs
  // (naming the engine file).
  std::string mismatch(daemon::PixelFormat format, int width, int height) const;

  // Runs the engine on `frame` (borrowed for the call) and fills the result's payload, stage
  // times and frame copies. Throws std::runtime_error with libedgert's or the postprocessor's
  // message when the frame cannot be run.
  daemon::Result run(const daemon::Frame& frame);

 private:
  FrameInferenceConfig config_;
  Engine engine_;
  Context context_;
  edgert_tensor_info input_info_{};
  std::optional<daemon::CameraFrameInput> camera_;
  std::vector<std::string> output_names_;
  daemon::Preprocessor preprocessor_;
  daemon::Postprocessor postprocessor_;
  daemon::FrameStaging staging_;           // camera engines: a packed copy of padded frames
  std::vector<float> input_;               // what Preprocessor writes, reused between frames
  std::vector<edgert_tensor> outputs_;     // views of the context's outputs, valid until the next run
};

}  // namespace edgert::gst

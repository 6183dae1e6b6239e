#include "frame_inference.h"

#include <stdexcept>

namespace edgert::gst {
namespace {

// Loads through the C++ wrapper; its errors name the engine file, as libedgert's may not.
Engine load_engine(const FrameInferenceConfig& config) {
  edgert_load_options options;
  edgert_load_options_init(&options);
  options.plugin_path = config.plugin_dir.empty() ? nullptr : config.plugin_dir.c_str();
  try {
    return Engine(config.engine_path, &options);
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.find(config.engine_path) != std::string::npos) throw std::runtime_error(message);
    throw std::runtime_error("engine '" + config.engine_path + "': " + message);
  }
}

std::string describe_dims(const edgert_tensor_info& info) {
  std::string text = "[";
  for (int32_t d = 0; d < info.rank; ++d) text += (d ? ", " : "") + std::to_string(info.dims[d]);
  return text + "]";
}

// The float input Preprocessor writes, shaped as layout_for read it from the engine.
edgert_tensor image_tensor(const daemon::InputLayout& layout, float* data) {
  edgert_tensor input{};
  input.dtype = EDGERT_DTYPE_FLOAT32;
  input.rank = 4;
  const int64_t nchw[4] = {1, layout.channels, layout.height, layout.width};
  const int64_t nhwc[4] = {1, layout.height, layout.width, layout.channels};
  for (int d = 0; d < 4; ++d) input.dims[d] = layout.nchw ? nchw[d] : nhwc[d];
  input.data = data;
  return input;
}

}  // namespace

FrameInference::FrameInference(const FrameInferenceConfig& config)
    : config_(config),
      engine_(load_engine(config_)),
      context_(engine_),
      preprocessor_(config.preprocess),
      postprocessor_(config.postprocess),
      staging_(daemon::FrameMemory::host()) {
  const std::string what = "engine '" + config.engine_path + "'";
  if (engine_.num_inputs() != 1)
    throw std::runtime_error(what + " has " + std::to_string(engine_.num_inputs()) +
                             " inputs; edgertinfer feeds one, the video frame");
  input_info_ = engine_.input_info(0);
  camera_ = daemon::camera_frame_input(input_info_);
  if (!camera_) {
    const std::string input = std::string("input '") + (input_info_.name ? input_info_.name : "") + "' " +
                              describe_dims(input_info_);
    if (input_info_.dtype != EDGERT_DTYPE_FLOAT32)
      throw std::runtime_error(what + ": " + input + " is neither float32, as edgertd's preprocessing writes it, nor a " +
                               "camera frame (uint8, edgert build --camera)");
    try {
      daemon::layout_for(input_info_.dims, input_info_.rank, 1, 1);
    } catch (const std::exception& e) {
      throw std::runtime_error(what + ": " + input + ": " + e.what());
    }
  }
  for (int32_t o = 0; o < engine_.num_outputs(); ++o) {
    const edgert_tensor_info info = engine_.output_info(o);
    output_names_.push_back(info.name ? info.name : "");
  }
}

std::string FrameInference::mismatch(daemon::PixelFormat format, int width, int height) const {
  const std::string mismatch = camera_ ? daemon::camera_frame_mismatch(*camera_, format, width, height) : "";
  return mismatch.empty() ? "" : "engine '" + config_.engine_path + "' does not fit the caps: " + mismatch;
}

daemon::Result FrameInference::run(const daemon::Frame& frame) {
  daemon::Result result;
  result.sequence = frame.sequence;
  result.capture_ns = frame.capture_ns;
  result.engine = config_.engine_path;
  const uint64_t started = daemon::monotonic_ns();
  if (camera_) {
    const edgert_tensor input = daemon::camera_frame_tensor(frame, *camera_, staging_, false, &result.frame_copies);
    const uint64_t ready = daemon::monotonic_ns();
    result.times.preprocess_us = (ready - started) / 1000.0;
    context_.run({input});
  } else {
    const daemon::InputLayout layout = daemon::layout_for(input_info_.dims, input_info_.rank, frame.width, frame.height);
    input_.resize(static_cast<size_t>(layout.channels) * layout.width * layout.height);
    result.frame_copies = preprocessor_.run(frame, layout, input_.data());
    result.times.preprocess_us = (daemon::monotonic_ns() - started) / 1000.0;
    context_.run({image_tensor(layout, input_.data())});
  }
  const uint64_t inferred = daemon::monotonic_ns();
  result.times.inference_us = (inferred - started) / 1000.0 - result.times.preprocess_us;
  outputs_.clear();
  for (int32_t o = 0; o < engine_.num_outputs(); ++o) outputs_.push_back(context_.output(o));
  postprocessor_.run(outputs_, output_names_, frame.width, frame.height, &result);
  const uint64_t done = daemon::monotonic_ns();
  result.times.postprocess_us = (done - inferred) / 1000.0;
  result.times.total_us = (done - started) / 1000.0;
  return result;
}

}  // namespace edgert::gst

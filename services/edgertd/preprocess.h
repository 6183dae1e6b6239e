// Camera frame -> engine input in one pass: colour conversion (YUYV/NV12/RGB24 -> RGB or BGR,
// or luma for one-channel models), bilinear resize, scaling to [0, 1], mean/std normalisation
// and layout (NCHW or NHWC), written straight into the engine's input buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"
#include "frame.h"

namespace edgert::daemon {

struct InputLayout {
  bool nchw = true;  // else NHWC
  int channels = 3;  // 1 (luma) or 3
  int width = 0, height = 0;
};

// Works out NCHW/NHWC and the size from an engine input shape ([1,C,H,W] or [1,H,W,C]);
// dynamic H/W (-1) take the frame's size. Throws std::runtime_error when it cannot be an image.
InputLayout layout_for(const int64_t* dims, int32_t rank, int frame_width, int frame_height);

class Preprocessor {
 public:
  explicit Preprocessor(const PreprocessConfig& config) : config_(config) {}
  // Writes `layout.channels * width * height` floats to `out`. Returns the number of extra full
  // copies of the frame it had to make (MJPEG decodes into a scratch image first: 1; else 0).
  uint32_t run(const Frame& frame, const InputLayout& layout, float* out);

 private:
  const uint8_t* decode_mjpeg(const Frame& frame);

  PreprocessConfig config_;
  std::vector<uint8_t> decoded_;  // MJPEG only: the RGB24 image
  std::vector<int32_t> x0_, x1_;  // per output column: source columns and weight (x 1024)
  std::vector<int32_t> wx_;
  int cached_out_w_ = -1, cached_in_w_ = -1;
};

}  // namespace edgert::daemon

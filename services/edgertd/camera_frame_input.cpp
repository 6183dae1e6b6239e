#include "camera_frame_input.h"

#include <cstring>
#include <stdexcept>

namespace edgert::daemon {
namespace {

// Bytes of one row of the frame's first plane (every plane of NV12) when packed.
size_t packed_row(PixelFormat format, int width) {
  return format == PixelFormat::YUYV ? static_cast<size_t>(width) * 2
         : format == PixelFormat::RGB24 ? static_cast<size_t>(width) * 3
                                        : static_cast<size_t>(width);
}

}  // namespace

std::string CameraFrameInput::describe() const {
  return std::string(pixel_format_name(format)) + " " + std::to_string(width) + "x" + std::to_string(height);
}

std::optional<CameraFrameInput> camera_frame_input(const edgert_tensor_info& input) {
  if (input.dtype != EDGERT_DTYPE_UINT8) return std::nullopt;
  CameraFrameInput c;
  if (input.rank == 3 && (input.dims[2] == 2 || input.dims[2] == 3)) {
    c.format = input.dims[2] == 2 ? PixelFormat::YUYV : PixelFormat::RGB24;
    c.height = static_cast<int>(input.dims[0]);
    c.width = static_cast<int>(input.dims[1]);
  } else if (input.rank == 2 && input.dims[0] % 3 == 0) {
    c.format = PixelFormat::NV12;
    c.height = static_cast<int>(input.dims[0] / 3 * 2);
    c.width = static_cast<int>(input.dims[1]);
  } else {
    return std::nullopt;
  }
  if (c.width <= 0 || c.height <= 0) return std::nullopt;
  return c;
}

std::string camera_frame_mismatch(const CameraFrameInput& input, PixelFormat format, int width, int height) {
  if (input.format == format && input.width == width && input.height == height) return "";
  return "the engine takes " + input.describe() + " frames (built with --camera), the source delivers " +
         pixel_format_name(format) + " " + std::to_string(width) + "x" + std::to_string(height);
}

FrameStaging::~FrameStaging() {
  if (data_) memory_->free(data_);
}

uint8_t* FrameStaging::reserve(size_t bytes) {
  if (bytes <= bytes_) return data_;
  uint8_t* grown = static_cast<uint8_t*>(memory_->allocate(bytes));
  if (data_) memory_->free(data_);
  data_ = grown;
  bytes_ = bytes;
  return data_;
}

edgert_tensor camera_frame_tensor(const Frame& frame, const CameraFrameInput& input, FrameStaging& staging,
                                  bool device_mapped, uint32_t* copies) {
  const std::string mismatch = camera_frame_mismatch(input, frame.format, frame.width, frame.height);
  if (!mismatch.empty()) throw std::runtime_error(mismatch);
  edgert_tensor t{};
  t.dtype = EDGERT_DTYPE_UINT8;
  const size_t row = packed_row(frame.format, frame.width);
  const size_t rows = static_cast<size_t>(frame.height);
  if (frame.format == PixelFormat::NV12) {
    t.rank = 2;
    t.dims[0] = frame.height * 3 / 2;
    t.dims[1] = frame.width;
  } else {
    t.rank = 3;
    t.dims[0] = frame.height;
    t.dims[1] = frame.width;
    t.dims[2] = frame.format == PixelFormat::YUYV ? 2 : 3;
  }
  const bool nv12 = frame.format == PixelFormat::NV12;
  const bool packed = frame.strides[0] == row &&
                      (!nv12 || (frame.strides[1] == row && frame.planes[1] == frame.planes[0] + row * rows));
  if (packed && (frame.device_mapped || !device_mapped)) {
    t.data = const_cast<uint8_t*>(frame.planes[0]);
    return t;
  }
  // Padded rows, NV12's planes apart (multi-planar capture), or memory the GPU cannot read:
  // one packed copy.
  uint8_t* packed_frame = staging.reserve(row * (nv12 ? rows * 3 / 2 : rows));
  for (size_t y = 0; y < rows; ++y) std::memcpy(packed_frame + y * row, frame.planes[0] + y * frame.strides[0], row);
  if (nv12)
    for (size_t y = 0; y < rows / 2; ++y)
      std::memcpy(packed_frame + (rows + y) * row, frame.planes[1] + y * frame.strides[1], row);
  ++*copies;
  t.data = packed_frame;
  return t;
}

}  // namespace edgert::daemon

#include "preprocess.h"

#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <stdexcept>

namespace edgert::daemon {
namespace {

inline uint8_t clamp_u8(int v) { return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

// BT.601 limited-range YUV -> RGB, 10-bit fixed point (what V4L2 cameras deliver by default).
inline void yuv_to_rgb(int y, int u, int v, int rgb[3]) {
  int c = (y - 16) * 1192, d = u - 128, e = v - 128;
  rgb[0] = clamp_u8((c + 1634 * e + 512) >> 10);
  rgb[1] = clamp_u8((c - 401 * d - 833 * e + 512) >> 10);
  rgb[2] = clamp_u8((c + 2066 * d + 512) >> 10);
}

// RGB (and luma) of source pixel (x, y), whatever the format.
inline void fetch(const Frame& f, const uint8_t* rgb24, int x, int y, int out[3], int* luma) {
  switch (f.format) {
    case PixelFormat::YUYV: {
      const uint8_t* p = f.planes[0] + static_cast<size_t>(y) * f.strides[0] + static_cast<size_t>(x / 2) * 4;
      int yy = p[(x & 1) ? 2 : 0];
      *luma = yy;
      yuv_to_rgb(yy, p[1], p[3], out);
      return;
    }
    case PixelFormat::NV12: {
      int yy = f.planes[0][static_cast<size_t>(y) * f.strides[0] + x];
      const uint8_t* uv = f.planes[1] + static_cast<size_t>(y / 2) * f.strides[1] + static_cast<size_t>(x / 2) * 2;
      *luma = yy;
      yuv_to_rgb(yy, uv[0], uv[1], out);
      return;
    }
    default: {
      const uint8_t* p = rgb24 + (static_cast<size_t>(y) * (f.format == PixelFormat::RGB24 ? f.strides[0] : f.width * 3u)) +
                         static_cast<size_t>(x) * 3;
      out[0] = p[0], out[1] = p[1], out[2] = p[2];
      *luma = (77 * p[0] + 150 * p[1] + 29 * p[2]) >> 8;
      return;
    }
  }
}

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
};

}  // namespace

InputLayout layout_for(const int64_t* dims, int32_t rank, int frame_width, int frame_height) {
  if (rank != 4) throw std::runtime_error("engine input must be a 4-D image tensor, it has rank " + std::to_string(rank));
  InputLayout l;
  if (dims[1] == 1 || dims[1] == 3) {
    l.nchw = true;
    l.channels = static_cast<int>(dims[1]);
    l.height = static_cast<int>(dims[2]);
    l.width = static_cast<int>(dims[3]);
  } else if (dims[3] == 1 || dims[3] == 3) {
    l.nchw = false;
    l.channels = static_cast<int>(dims[3]);
    l.height = static_cast<int>(dims[1]);
    l.width = static_cast<int>(dims[2]);
  } else {
    throw std::runtime_error("engine input is not an image with 1 or 3 channels (NCHW or NHWC)");
  }
  if (l.height < 0) l.height = frame_height;
  if (l.width < 0) l.width = frame_width;
  return l;
}

const uint8_t* Preprocessor::decode_mjpeg(const Frame& frame) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = [](j_common_ptr c) { longjmp(reinterpret_cast<JpegError*>(c->err)->jump, 1); };
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    throw std::runtime_error("corrupt MJPEG frame " + std::to_string(frame.sequence));
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, frame.planes[0], static_cast<unsigned long>(frame.bytes_used));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  if (static_cast<int>(cinfo.output_width) != frame.width || static_cast<int>(cinfo.output_height) != frame.height) {
    jpeg_destroy_decompress(&cinfo);
    throw std::runtime_error("MJPEG frame size differs from the negotiated format");
  }
  decoded_.resize(static_cast<size_t>(frame.width) * frame.height * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = decoded_.data() + static_cast<size_t>(cinfo.output_scanline) * frame.width * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return decoded_.data();
}

uint32_t Preprocessor::run(const Frame& frame, const InputLayout& layout, float* out) {
  uint32_t copies = 0;
  const uint8_t* rgb24 = frame.planes[0];
  if (frame.format == PixelFormat::MJPEG) {
    rgb24 = decode_mjpeg(frame);
    copies = 1;
  }
  const int W = layout.width, H = layout.height;
  if (cached_out_w_ != W || cached_in_w_ != frame.width) {
    x0_.resize(W), x1_.resize(W), wx_.resize(W);
    for (int x = 0; x < W; ++x) {
      float sx = std::max(0.0f, (x + 0.5f) * frame.width / W - 0.5f);
      int i = std::min(static_cast<int>(sx), frame.width - 1);
      x0_[x] = i;
      x1_[x] = std::min(i + 1, frame.width - 1);
      wx_[x] = static_cast<int32_t>((sx - i) * 1024);
    }
    cached_out_w_ = W;
    cached_in_w_ = frame.width;
  }
  const bool bgr = config_.channel_order == "bgr";
  float scale[3], bias[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * config_.std[c]);
    bias[c] = -config_.mean[c] / config_.std[c];
  }
  const size_t plane = static_cast<size_t>(W) * H;
  for (int y = 0; y < H; ++y) {
    float sy = std::max(0.0f, (y + 0.5f) * frame.height / H - 0.5f);
    int y0 = std::min(static_cast<int>(sy), frame.height - 1), y1 = std::min(y0 + 1, frame.height - 1);
    int wy = static_cast<int>((sy - y0) * 1024);
    for (int x = 0; x < W; ++x) {
      int a[3], b[3], c[3], d[3], la, lb, lc, ld;
      fetch(frame, rgb24, x0_[x], y0, a, &la);
      fetch(frame, rgb24, x1_[x], y0, b, &lb);
      fetch(frame, rgb24, x0_[x], y1, c, &lc);
      fetch(frame, rgb24, x1_[x], y1, d, &ld);
      int wx = wx_[x];
      auto lerp = [&](int p, int q, int r, int s) {
        int top = p * (1024 - wx) + q * wx, bottom = r * (1024 - wx) + s * wx;
        return (top * (1024 - wy) + bottom * wy) / (1024.0f * 1024.0f);
      };
      size_t pixel = static_cast<size_t>(y) * W + x;
      if (layout.channels == 1) {
        float v = lerp(la, lb, lc, ld) * scale[0] + bias[0];
        out[pixel] = v;
        continue;
      }
      for (int ch = 0; ch < 3; ++ch) {
        int src = bgr ? 2 - ch : ch;
        float v = lerp(a[src], b[src], c[src], d[src]) * scale[ch] + bias[ch];
        if (layout.nchw) out[ch * plane + pixel] = v;
        else out[pixel * 3 + ch] = v;
      }
    }
  }
  return copies;
}

}  // namespace edgert::daemon

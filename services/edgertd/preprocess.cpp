#include "preprocess.h"

#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <stdexcept>

#include "camera_frame.h"

namespace edgert::daemon {
namespace {

// The frame's planes as the shared arithmetic sees them (MJPEG: its decoded RGB24 image).
camera::Planes planes_of(const Frame& f, const uint8_t* rgb24) {
  camera::Planes p;
  p.width = f.width;
  p.height = f.height;
  switch (f.format) {
    case PixelFormat::YUYV:
      p.layout = camera::Layout::kYuyv;
      break;
    case PixelFormat::NV12:
      p.layout = camera::Layout::kNv12;
      break;
    default:
      p.layout = camera::Layout::kRgb24;
      break;
  }
  p.plane[0] = f.format == PixelFormat::MJPEG ? rgb24 : f.planes[0];
  p.stride[0] = f.format == PixelFormat::MJPEG ? static_cast<size_t>(f.width) * 3 : f.strides[0];
  p.plane[1] = f.planes[1];
  p.stride[1] = f.strides[1];
  return p;
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
  // Per output column: source columns and weight, kept while the sizes stay.
  if (cached_out_w_ != W || cached_in_w_ != frame.width) {
    x0_.resize(W), x1_.resize(W), wx_.resize(W);
    for (int x = 0; x < W; ++x) camera::bilinear_source(x, W, frame.width, &x0_[x], &x1_[x], &wx_[x]);
    cached_out_w_ = W;
    cached_in_w_ = frame.width;
  }
  const camera::Planes planes = planes_of(frame, rgb24);
  const bool bgr = config_.channel_order == "bgr";
  const camera::Normalization norm = camera::normalization(config_.mean.data(), config_.std.data());
  const size_t plane = static_cast<size_t>(W) * H;
  for (int y = 0; y < H; ++y) {
    int y0, y1, wy;
    camera::bilinear_source(y, H, frame.height, &y0, &y1, &wy);
    for (int x = 0; x < W; ++x) {
      int a[3], b[3], c[3], d[3], la, lb, lc, ld;
      camera::fetch(planes, x0_[x], y0, a, &la);
      camera::fetch(planes, x1_[x], y0, b, &lb);
      camera::fetch(planes, x0_[x], y1, c, &lc);
      camera::fetch(planes, x1_[x], y1, d, &ld);
      const int wx = wx_[x];
      const size_t pixel = static_cast<size_t>(y) * W + x;
      if (layout.channels == 1) {
        out[pixel] = camera::bilinear(la, lb, lc, ld, wx, wy) * norm.scale[0] + norm.bias[0];
        continue;
      }
      for (int ch = 0; ch < 3; ++ch) {
        const int src = bgr ? 2 - ch : ch;
        const float v = camera::bilinear(a[src], b[src], c[src], d[src], wx, wy) * norm.scale[ch] + norm.bias[ch];
        if (layout.nchw) out[ch * plane + pixel] = v;
        else out[pixel * 3 + ch] = v;
      }
    }
  }
  return copies;
}

}  // namespace edgert::daemon

#include "video_frame.h"

namespace edgert::gst {

bool pixel_format_of(GstVideoFormat format, daemon::PixelFormat* pixel_format) {
  switch (format) {
    case GST_VIDEO_FORMAT_YUY2: *pixel_format = daemon::PixelFormat::YUYV; return true;
    case GST_VIDEO_FORMAT_NV12: *pixel_format = daemon::PixelFormat::NV12; return true;
    case GST_VIDEO_FORMAT_RGB: *pixel_format = daemon::PixelFormat::RGB24; return true;
    default: return false;
  }
}

daemon::Frame frame_of(const GstVideoFrame& video_frame, uint64_t sequence) {
  daemon::Frame frame;
  frame.sequence = sequence;
  const GstClockTime pts = GST_BUFFER_PTS(video_frame.buffer);
  frame.capture_ns = GST_CLOCK_TIME_IS_VALID(pts) ? pts : 0;
  pixel_format_of(GST_VIDEO_FRAME_FORMAT(&video_frame), &frame.format);
  frame.width = GST_VIDEO_FRAME_WIDTH(&video_frame);
  frame.height = GST_VIDEO_FRAME_HEIGHT(&video_frame);
  const guint planes = GST_VIDEO_FRAME_N_PLANES(&video_frame);
  for (guint p = 0; p < planes && p < 2; ++p) {
    frame.planes[p] = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&video_frame, p));
    frame.strides[p] = static_cast<size_t>(GST_VIDEO_FRAME_PLANE_STRIDE(&video_frame, p));
  }
  frame.bytes_used = GST_VIDEO_FRAME_SIZE(&video_frame);
  return frame;
}

}  // namespace edgert::gst

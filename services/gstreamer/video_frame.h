// GStreamer's raw video frames as edgertd's Frame: the formats edgertd's preprocessing reads
// (YUY2, NV12, RGB: its YUYV, NV12 and RGB24), viewed in place with each plane's own stride.
#pragma once

#include <gst/video/video.h>

#include <cstdint>

#include "frame.h"

namespace edgert::gst {

// The caps formats edgertinfer accepts, as GST_VIDEO_CAPS_MAKE takes them.
#define EDGERT_INFER_VIDEO_FORMATS "{ YUY2, NV12, RGB }"

// edgertd's name for a GStreamer format; false for a format it does not read.
bool pixel_format_of(GstVideoFormat format, daemon::PixelFormat* pixel_format);

// A view of `video_frame`'s planes (mapped by the caller, borrowed while the Frame is used).
daemon::Frame frame_of(const GstVideoFrame& video_frame, uint64_t sequence);

}  // namespace edgert::gst

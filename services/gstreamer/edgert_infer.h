// edgertinfer: a video filter that runs an edgert engine on every frame, as an edgertd pipeline
// does (the same preprocessing, engine run and postprocessing code), and publishes each result
// twice: as a GstEdgertInferMeta on the frame's buffer (edgert_infer_meta.h) and as an element
// message named "edgertinfer" on the bus (frame, pts, json, latency-us).
//
// The pixels pass through untouched, in place. It is not GstBaseTransform's passthrough mode:
// that hands over buffers that may not be writable, and attaching the meta needs a writable one.
//
// The engine loads when the element goes from READY to PAUSED; a missing or bad engine fails that
// state change with a GST_ELEMENT_ERROR carrying libedgert's message.
#pragma once

#include <gst/video/gstvideofilter.h>

#include <memory>

namespace edgert::gst {
class FrameInference;
}

G_BEGIN_DECLS

#define GST_TYPE_EDGERT_INFER (gst_edgert_infer_get_type())
G_DECLARE_FINAL_TYPE(GstEdgertInfer, gst_edgert_infer, GST, EDGERT_INFER, GstVideoFilter)

G_END_DECLS

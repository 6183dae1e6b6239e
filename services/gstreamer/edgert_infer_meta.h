// The result edgertinfer attaches to each frame's buffer: the same JSON it posts on the bus.
//
// The meta carries the postprocessed result (edgertd's JSON: classification top-k, detections
// with boxes, a segmentation summary, or the raw outputs' names, shapes and first values), not
// the output tensors: those belong to the engine's context and are overwritten by the next
// frame's run, so carrying them would mean copying every output of every frame (a segmentation
// map is megabytes) for readers that mostly want the top class or the boxes. JSON is also what
// edgertd streams, so one parser serves both.
//
// The plugin exports none of these functions (GStreamer loads it for its entry point only).
// Applications find the meta by its API type's name once the plugin is loaded, and read it with
// this struct's layout:
//   GType api = g_type_from_name("GstEdgertInferMetaAPI");
//   const GstEdgertInferMeta* meta = (const GstEdgertInferMeta*)gst_buffer_get_meta(buffer, api);
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

typedef struct {
  GstMeta meta;
  guint64 frame;      // the element's frame counter since it started, from 0
  gchar* json;        // the result, owned by the meta (freed with it)
  gdouble latency_us; // preprocessing, inference and postprocessing of this frame
} GstEdgertInferMeta;

GType gst_edgert_infer_meta_api_get_type(void);
const GstMetaInfo* gst_edgert_infer_meta_get_info(void);

// Adds a meta holding a copy of `json`; `buffer` must be writable.
GstEdgertInferMeta* gst_buffer_add_edgert_infer_meta(GstBuffer* buffer, guint64 frame, const gchar* json,
                                                     gdouble latency_us);

G_END_DECLS

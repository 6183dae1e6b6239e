#include "edgert_infer_meta.h"

#include <gst/video/video.h>

namespace {

gboolean meta_init(GstMeta* meta, gpointer params, GstBuffer* buffer) {
  GstEdgertInferMeta* m = reinterpret_cast<GstEdgertInferMeta*>(meta);
  m->frame = 0;
  m->json = nullptr;
  m->latency_us = 0;
  return TRUE;
}

void meta_free(GstMeta* meta, GstBuffer* buffer) {
  g_free(reinterpret_cast<GstEdgertInferMeta*>(meta)->json);
}

// Copies travel with the buffer (gst_buffer_copy, a writable copy of it); transforms that change
// the picture are left to the tags below.
gboolean meta_transform(GstBuffer* dest, GstMeta* meta, GstBuffer* buffer, GQuark type, gpointer data) {
  if (!GST_META_TRANSFORM_IS_COPY(type)) return FALSE;
  const GstEdgertInferMeta* m = reinterpret_cast<const GstEdgertInferMeta*>(meta);
  return gst_buffer_add_edgert_infer_meta(dest, m->frame, m->json, m->latency_us) != nullptr;
}

}  // namespace

GType gst_edgert_infer_meta_api_get_type(void) {
  // Tagged video and size: detection boxes are in the frame's pixels, so an element that scales
  // or crops the picture drops the meta rather than pass boxes that no longer fit it.
  static const gchar* tags[] = {GST_META_TAG_VIDEO_STR, GST_META_TAG_VIDEO_SIZE_STR, nullptr};
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    GType registered = gst_meta_api_type_register("GstEdgertInferMetaAPI", tags);
    g_once_init_leave(&type, registered);
  }
  return type;
}

const GstMetaInfo* gst_edgert_infer_meta_get_info(void) {
  static const GstMetaInfo* info = nullptr;
  if (g_once_init_enter(&info)) {
    const GstMetaInfo* registered =
        gst_meta_register(gst_edgert_infer_meta_api_get_type(), "GstEdgertInferMeta", sizeof(GstEdgertInferMeta),
                          meta_init, meta_free, meta_transform);
    g_once_init_leave(&info, registered);
  }
  return info;
}

GstEdgertInferMeta* gst_buffer_add_edgert_infer_meta(GstBuffer* buffer, guint64 frame, const gchar* json,
                                                     gdouble latency_us) {
  GstEdgertInferMeta* meta =
      reinterpret_cast<GstEdgertInferMeta*>(gst_buffer_add_meta(buffer, gst_edgert_infer_meta_get_info(), nullptr));
  if (!meta) return nullptr;
  meta->frame = frame;
  meta->json = g_strdup(json);
  meta->latency_us = latency_us;
  return meta;
}

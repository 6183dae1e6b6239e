// The GStreamer plugin "edgert": one element, edgertinfer (edgert_infer.h).
#include <gst/gst.h>

#include "edgert_infer.h"
#include "edgert_infer_meta.h"

#ifndef PACKAGE
#define PACKAGE "edgert"
#endif

static gboolean plugin_init(GstPlugin* plugin) {
  // Registered with the plugin, not on the first frame: applications look the meta's API type up
  // by name (edgert_infer_meta.h) as soon as they have made the element.
  gst_edgert_infer_meta_get_info();
  return gst_element_register(plugin, "edgertinfer", GST_RANK_NONE, GST_TYPE_EDGERT_INFER);
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, edgert, "edgert inference on video frames", plugin_init,
                  EDGERT_VERSION, "unknown", "edgert", "edgert")

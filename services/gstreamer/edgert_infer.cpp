#include "edgert_infer.h"

#include <gst/video/video.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "edgert_infer_meta.h"
#include "frame_inference.h"
#include "video_frame.h"

GST_DEBUG_CATEGORY_STATIC(edgert_infer_debug);
#define GST_CAT_DEFAULT edgert_infer_debug

namespace {

// What the properties hold; read under the object lock, applied when the engine loads.
struct Settings {
  std::string engine;
  std::string plugin_dir;
  std::string channel_order = "rgb";
  std::string mean = "0,0,0";
  std::string std = "1,1,1";
  std::string postprocess = "raw";
  int top_k = 5;
  std::string labels;
  float score_threshold = 0.5f;
  float iou_threshold = 0.45f;
};

enum {
  PROP_0,
  PROP_ENGINE,
  PROP_PLUGIN_DIR,
  PROP_CHANNEL_ORDER,
  PROP_MEAN,
  PROP_STD,
  PROP_POSTPROCESS,
  PROP_TOP_K,
  PROP_LABELS,
  PROP_SCORE_THRESHOLD,
  PROP_IOU_THRESHOLD,
};

// "0.485,0.456,0.406" (one value per channel, R G B) or one value for all three.
bool parse_channel_values(const std::string& text, std::vector<float>* values) {
  std::vector<float> parsed;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const float v = std::strtof(item.c_str(), &end);
    if (end == item.c_str() || *end != '\0') return false;
    parsed.push_back(v);
  }
  if (parsed.size() == 1) parsed.assign(3, parsed[0]);
  if (parsed.size() != 3) return false;
  *values = parsed;
  return true;
}

// The properties as the shared preprocessing and postprocessing take them; "" or what is wrong.
std::string inference_config(const Settings& s, edgert::gst::FrameInferenceConfig* config) {
  if (s.engine.empty()) return "no engine: set the engine property to an edgert engine file (edgert build -o FILE)";
  config->engine_path = s.engine;
  config->plugin_dir = s.plugin_dir;
  if (s.channel_order != "rgb" && s.channel_order != "bgr")
    return "channel-order is '" + s.channel_order + "', expected rgb or bgr";
  config->preprocess.channel_order = s.channel_order;
  if (!parse_channel_values(s.mean, &config->preprocess.mean))
    return "mean is '" + s.mean + "', expected three comma-separated numbers (R,G,B) or one";
  if (!parse_channel_values(s.std, &config->preprocess.std))
    return "std is '" + s.std + "', expected three comma-separated numbers (R,G,B) or one";
  for (float v : config->preprocess.std)
    if (v == 0) return "std is '" + s.std + "': a channel's std of 0 would divide by zero";
  if (s.postprocess != "classification" && s.postprocess != "detection" && s.postprocess != "segmentation" &&
      s.postprocess != "raw")
    return "postprocess is '" + s.postprocess + "', expected classification, detection, segmentation or raw";
  config->postprocess.type = s.postprocess;
  config->postprocess.top_k = s.top_k;
  config->postprocess.labels = s.labels;
  config->postprocess.score_threshold = s.score_threshold;
  config->postprocess.iou_threshold = s.iou_threshold;
  return "";
}

std::string result_json(const edgert::daemon::Result& r, GstClockTime pts, const GstVideoFrame& frame) {
  nlohmann::json json = {
      {"frame", r.sequence},
      {"pts_ns", GST_CLOCK_TIME_IS_VALID(pts) ? nlohmann::json(pts) : nlohmann::json(nullptr)},
      {"engine", r.engine},
      {"image",
       {{"format", gst_video_format_to_string(GST_VIDEO_FRAME_FORMAT(&frame))},
        {"width", GST_VIDEO_FRAME_WIDTH(&frame)},
        {"height", GST_VIDEO_FRAME_HEIGHT(&frame)}}},
      {"latency_us",
       {{"preprocess", r.times.preprocess_us},
        {"inference", r.times.inference_us},
        {"postprocess", r.times.postprocess_us},
        {"total", r.times.total_us}}},
      {"frame_copies", r.frame_copies},
      {"result", r.payload}};
  return json.dump();
}

}  // namespace

struct _GstEdgertInfer {
  GstVideoFilter parent;
  Settings* settings;                      // under the object lock
  edgert::gst::FrameInference* inference;  // from start() to stop(); used by the streaming thread
  // The caps format a loaded camera engine takes ("NV12"), else null: under the object lock,
  // since caps queries come from other threads than the state changes that load the engine.
  const char* camera_format;
  guint64 frames;                          // processed since start()
  // Caps were refused (set_info): said once. The source retries negotiation after a refusal,
  // and an error posted on every retry raced gst-launch's preroll into a hang.
  bool caps_refused;
};

G_DEFINE_TYPE(GstEdgertInfer, gst_edgert_infer, GST_TYPE_VIDEO_FILTER)

namespace {

void set_property(GObject* object, guint id, const GValue* value, GParamSpec* pspec) {
  GstEdgertInfer* self = GST_EDGERT_INFER(object);
  GST_OBJECT_LOCK(self);
  Settings& s = *self->settings;
  auto text = [&] { return std::string(g_value_get_string(value) ? g_value_get_string(value) : ""); };
  switch (id) {
    case PROP_ENGINE: s.engine = text(); break;
    case PROP_PLUGIN_DIR: s.plugin_dir = text(); break;
    case PROP_CHANNEL_ORDER: s.channel_order = text(); break;
    case PROP_MEAN: s.mean = text(); break;
    case PROP_STD: s.std = text(); break;
    case PROP_POSTPROCESS: s.postprocess = text(); break;
    case PROP_TOP_K: s.top_k = g_value_get_int(value); break;
    case PROP_LABELS: s.labels = text(); break;
    case PROP_SCORE_THRESHOLD: s.score_threshold = g_value_get_float(value); break;
    case PROP_IOU_THRESHOLD: s.iou_threshold = g_value_get_float(value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

void get_property(GObject* object, guint id, GValue* value, GParamSpec* pspec) {
  GstEdgertInfer* self = GST_EDGERT_INFER(object);
  GST_OBJECT_LOCK(self);
  const Settings& s = *self->settings;
  switch (id) {
    case PROP_ENGINE: g_value_set_string(value, s.engine.c_str()); break;
    case PROP_PLUGIN_DIR: g_value_set_string(value, s.plugin_dir.c_str()); break;
    case PROP_CHANNEL_ORDER: g_value_set_string(value, s.channel_order.c_str()); break;
    case PROP_MEAN: g_value_set_string(value, s.mean.c_str()); break;
    case PROP_STD: g_value_set_string(value, s.std.c_str()); break;
    case PROP_POSTPROCESS: g_value_set_string(value, s.postprocess.c_str()); break;
    case PROP_TOP_K: g_value_set_int(value, s.top_k); break;
    case PROP_LABELS: g_value_set_string(value, s.labels.c_str()); break;
    case PROP_SCORE_THRESHOLD: g_value_set_float(value, s.score_threshold); break;
    case PROP_IOU_THRESHOLD: g_value_set_float(value, s.iou_threshold); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec); break;
  }
  GST_OBJECT_UNLOCK(self);
}

void finalize(GObject* object) {
  GstEdgertInfer* self = GST_EDGERT_INFER(object);
  delete self->inference;
  delete self->settings;
  G_OBJECT_CLASS(gst_edgert_infer_parent_class)->finalize(object);
}

gboolean start(GstBaseTransform* base) {
  GstEdgertInfer* self = GST_EDGERT_INFER(base);
  GST_OBJECT_LOCK(self);
  const Settings settings = *self->settings;
  GST_OBJECT_UNLOCK(self);
  edgert::gst::FrameInferenceConfig config;
  const std::string problem = inference_config(settings, &config);
  if (!problem.empty()) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("%s", problem.c_str()), (nullptr));
    return FALSE;
  }
  try {
    delete self->inference;
    self->inference = nullptr;
    self->inference = new edgert::gst::FrameInference(config);
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ, ("%s", e.what()),
                      ("edgertinfer could not load engine '%s' (plugin-dir '%s')", settings.engine.c_str(),
                       settings.plugin_dir.c_str()));
    return FALSE;
  }
  const auto& camera = self->inference->camera_input();
  GST_OBJECT_LOCK(self);
  self->camera_format = !camera                                             ? nullptr
                        : camera->format == edgert::daemon::PixelFormat::YUYV ? "YUY2"
                        : camera->format == edgert::daemon::PixelFormat::NV12 ? "NV12"
                                                                            : "RGB";
  GST_OBJECT_UNLOCK(self);
  self->frames = 0;
  self->caps_refused = false;
  GST_INFO_OBJECT(self, "engine '%s' loaded", settings.engine.c_str());
  return TRUE;
}

gboolean stop(GstBaseTransform* base) {
  GstEdgertInfer* self = GST_EDGERT_INFER(base);
  GST_OBJECT_LOCK(self);
  self->camera_format = nullptr;
  GST_OBJECT_UNLOCK(self);
  delete self->inference;
  self->inference = nullptr;
  return TRUE;
}

// A camera engine takes one pixel format: offered upstream as the only one, so a videoconvert
// before the element converts to it. The size stays open here and is checked in set_info, where
// a mismatch gets an error that says what the engine takes instead of a bare not-negotiated.
GstCaps* transform_caps(GstBaseTransform* base, GstPadDirection direction, GstCaps* caps, GstCaps* filter) {
  GstEdgertInfer* self = GST_EDGERT_INFER(base);
  GstCaps* result = gst_caps_copy(caps);
  GST_OBJECT_LOCK(self);
  const char* camera_format = self->camera_format;
  GST_OBJECT_UNLOCK(self);
  if (camera_format) {
    GstCaps* only = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, camera_format, nullptr);
    GstCaps* narrowed = gst_caps_intersect(result, only);
    gst_caps_unref(only);
    gst_caps_unref(result);
    result = narrowed;
  }
  if (filter) {
    GstCaps* filtered = gst_caps_intersect_full(filter, result, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(result);
    result = filtered;
  }
  return result;
}

gboolean set_info(GstVideoFilter* filter, GstCaps* incaps, GstVideoInfo* in_info, GstCaps* outcaps,
                  GstVideoInfo* out_info) {
  GstEdgertInfer* self = GST_EDGERT_INFER(filter);
  edgert::daemon::PixelFormat format;
  if (!edgert::gst::pixel_format_of(GST_VIDEO_INFO_FORMAT(in_info), &format)) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("video format %s is not one edgertd's preprocessing reads (YUY2, NV12, RGB)",
                       gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(in_info))),
                      (nullptr));
    return FALSE;
  }
  if (!self->inference) return FALSE;
  const std::string mismatch =
      self->inference->mismatch(format, GST_VIDEO_INFO_WIDTH(in_info), GST_VIDEO_INFO_HEIGHT(in_info));
  if (!mismatch.empty()) {
    if (!self->caps_refused)
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("%s", mismatch.c_str()), ("caps %" GST_PTR_FORMAT, incaps));
    self->caps_refused = true;
    return FALSE;
  }
  return TRUE;
}

GstFlowReturn transform_frame_ip(GstVideoFilter* filter, GstVideoFrame* video_frame) {
  GstEdgertInfer* self = GST_EDGERT_INFER(filter);
  const guint64 frame_number = self->frames++;
  const GstClockTime pts = GST_BUFFER_PTS(video_frame->buffer);
  edgert::daemon::Result result;
  try {
    result = self->inference->run(edgert::gst::frame_of(*video_frame, frame_number));
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("frame %" G_GUINT64_FORMAT ": %s", frame_number, e.what()), (nullptr));
    return GST_FLOW_ERROR;
  }
  const std::string json = result_json(result, pts, *video_frame);
  gst_buffer_add_edgert_infer_meta(video_frame->buffer, frame_number, json.c_str(), result.times.total_us);
  GstStructure* s = gst_structure_new("edgertinfer", "frame", G_TYPE_UINT64, frame_number, "pts", G_TYPE_UINT64,
                                      static_cast<guint64>(pts), "json", G_TYPE_STRING, json.c_str(), "latency-us",
                                      G_TYPE_DOUBLE, result.times.total_us, nullptr);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), s));
  return GST_FLOW_OK;
}

}  // namespace

static void gst_edgert_infer_class_init(GstEdgertInferClass* klass) {
  GST_DEBUG_CATEGORY_INIT(edgert_infer_debug, "edgertinfer", 0, "edgert inference element");
  GObjectClass* object_class = G_OBJECT_CLASS(klass);
  object_class->set_property = set_property;
  object_class->get_property = get_property;
  object_class->finalize = finalize;

  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  g_object_class_install_property(
      object_class, PROP_ENGINE,
      g_param_spec_string("engine", "Engine", "edgert engine file (edgert build -o FILE); required", nullptr, rw));
  g_object_class_install_property(
      object_class, PROP_PLUGIN_DIR,
      g_param_spec_string("plugin-dir", "Plugin directory",
                          "Colon-separated directories of edgert plugins; empty: $EDGERT_PLUGIN_PATH, then the "
                          "directory beside libedgert, then the install directory",
                          nullptr, rw));
  g_object_class_install_property(
      object_class, PROP_CHANNEL_ORDER,
      g_param_spec_string("channel-order", "Channel order", "Order of the engine's colour channels: rgb or bgr",
                          "rgb", rw));
  g_object_class_install_property(
      object_class, PROP_MEAN,
      g_param_spec_string("mean", "Mean",
                          "Per-channel mean (R,G,B) subtracted after scaling pixels to [0, 1], e.g. 0.485,0.456,0.406",
                          "0,0,0", rw));
  g_object_class_install_property(
      object_class, PROP_STD,
      g_param_spec_string("std", "Std", "Per-channel standard deviation (R,G,B) divided by after the mean, e.g. "
                          "0.229,0.224,0.225", "1,1,1", rw));
  g_object_class_install_property(
      object_class, PROP_POSTPROCESS,
      g_param_spec_string("postprocess", "Postprocess",
                          "What the result's JSON holds, as edgertd's postprocess type: classification (top-k), "
                          "detection (boxes), segmentation (class fractions) or raw (every output's name, shape "
                          "and first 16 values)",
                          "raw", rw));
  g_object_class_install_property(
      object_class, PROP_TOP_K,
      g_param_spec_int("top-k", "Top k", "Classes a classification result lists", 1, 1000, 5, rw));
  g_object_class_install_property(
      object_class, PROP_LABELS,
      g_param_spec_string("labels", "Labels", "File with one class label per line (optional)", nullptr, rw));
  g_object_class_install_property(
      object_class, PROP_SCORE_THRESHOLD,
      g_param_spec_float("score-threshold", "Score threshold", "Detections scoring less are dropped", 0.0f, 1.0f,
                         0.5f, rw));
  g_object_class_install_property(
      object_class, PROP_IOU_THRESHOLD,
      g_param_spec_float("iou-threshold", "IoU threshold",
                         "Non-maximum suppression overlap for detection models that leave it to edgertd", 0.0f,
                         1.0f, 0.45f, rw));

  GstElementClass* element_class = GST_ELEMENT_CLASS(klass);
  gst_element_class_set_static_metadata(
      element_class, "edgert inference", "Filter/Video/Analyzer",
      "Runs an edgert engine on each frame, as edgertd does; attaches the result as meta and posts it on the bus",
      "edgert maintainers <edgert@localhost>");
  GstCaps* caps = gst_caps_from_string(GST_VIDEO_CAPS_MAKE(EDGERT_INFER_VIDEO_FORMATS));
  gst_element_class_add_pad_template(element_class, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_element_class_add_pad_template(element_class, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);

  GstBaseTransformClass* transform_class = GST_BASE_TRANSFORM_CLASS(klass);
  transform_class->start = start;
  transform_class->stop = stop;
  transform_class->transform_caps = transform_caps;
  GstVideoFilterClass* filter_class = GST_VIDEO_FILTER_CLASS(klass);
  filter_class->set_info = set_info;
  filter_class->transform_frame_ip = transform_frame_ip;
}

static void gst_edgert_infer_init(GstEdgertInfer* self) {
  self->settings = new Settings();
  self->inference = nullptr;
  self->camera_format = nullptr;
  self->frames = 0;
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
  gst_base_transform_set_passthrough(GST_BASE_TRANSFORM(self), FALSE);
  gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), FALSE);
}

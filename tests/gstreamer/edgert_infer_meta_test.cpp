// edgertinfer in an application's pipeline. Its buffer meta (services/gstreamer/edgert_infer_meta.h)
// as an application reads it: found by its API type's name, on every buffer an appsink receives,
// holding the same frame number and JSON as that frame's bus message, and kept by a copy of the
// buffer. And caps a camera engine cannot take fail the stream with an error that says why: an
// error posted from the streaming thread while the pipeline prerolls, which gst-launch-1.0 itself
// may miss (it then hangs in preroll), so it is checked on the bus here.
// GST_PLUGIN_PATH points at the build's element; the engine is the one the gst.engines fixture
// built (tests/gstreamer/gst_element_test.py engines).
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "edgert_infer_meta.h"

namespace {

struct Frame {
  guint64 number = 0;
  std::string json;
};

class EdgertInferMetaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }

  void TearDown() override {
    if (pipeline_) {
      gst_element_set_state(pipeline_, GST_STATE_NULL);
      gst_object_unref(pipeline_);
    }
  }

  // Runs `frames` test-pattern frames through the element into an appsink; returns the meta of
  // each buffer the sink got (in order) and fills `messages` with the bus messages' frame -> json.
  std::vector<Frame> run(int frames, std::map<guint64, std::string>* messages) {
    const std::string description = "videotestsrc num-buffers=" + std::to_string(frames) +
                                    " ! videoconvert ! edgertinfer engine=" EDGERT_TEST_BINARY_DIR
                                    "/gst-work/demo.engine ! appsink name=sink sync=false";
    GError* error = nullptr;
    pipeline_ = gst_parse_launch(description.c_str(), &error);
    EXPECT_EQ(error, nullptr) << (error ? error->message : "");
    if (!pipeline_) return {};
    GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline_), "sink");
    EXPECT_NE(gst_element_set_state(pipeline_, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
    // The meta's API type exists once the element's plugin is loaded (by gst_parse_launch), before
    // any frame.
    const GType api = g_type_from_name("GstEdgertInferMetaAPI");
    EXPECT_NE(api, G_TYPE_INVALID);
    std::vector<Frame> seen;
    for (;;) {
      GstSample* sample = nullptr;
      // Bounded: after an error the sink gets no EOS, and the bus check below reports the error.
      g_signal_emit_by_name(sink, "try-pull-sample", static_cast<GstClockTime>(20 * GST_SECOND), &sample);
      if (!sample) break;
      GstBuffer* buffer = gst_sample_get_buffer(sample);
      const GstEdgertInferMeta* meta = reinterpret_cast<const GstEdgertInferMeta*>(gst_buffer_get_meta(buffer, api));
      EXPECT_NE(meta, nullptr) << "buffer " << seen.size() << " has no GstEdgertInferMeta";
      if (meta) {
        seen.push_back({meta->frame, meta->json ? meta->json : ""});
        EXPECT_GT(meta->latency_us, 0);
        GstBuffer* copy = gst_buffer_copy(buffer);
        const GstEdgertInferMeta* copied = reinterpret_cast<const GstEdgertInferMeta*>(gst_buffer_get_meta(copy, api));
        EXPECT_TRUE(copied && copied->frame == meta->frame && std::string(copied->json) == meta->json)
            << "a copy of buffer " << meta->frame << " lost or changed the meta";
        gst_buffer_unref(copy);
      }
      gst_sample_unref(sample);
    }
    gst_object_unref(sink);
    GstBus* bus = gst_element_get_bus(pipeline_);
    while (GstMessage* message = gst_bus_pop(bus)) {
      if (GST_MESSAGE_TYPE(message) == GST_MESSAGE_ERROR) {
        GError* e = nullptr;
        gst_message_parse_error(message, &e, nullptr);
        ADD_FAILURE() << "pipeline error: " << e->message;
        g_error_free(e);
      }
      const GstStructure* s = gst_message_get_structure(message);
      if (GST_MESSAGE_TYPE(message) == GST_MESSAGE_ELEMENT && gst_structure_has_name(s, "edgertinfer")) {
        guint64 frame = 0;
        EXPECT_TRUE(gst_structure_get_uint64(s, "frame", &frame));
        const gchar* json = gst_structure_get_string(s, "json");
        EXPECT_NE(json, nullptr);
        EXPECT_EQ(messages->count(frame), 0u) << "two messages for frame " << frame;
        (*messages)[frame] = json ? json : "";
      }
      gst_message_unref(message);
    }
    gst_object_unref(bus);
    return seen;
  }

  GstElement* pipeline_ = nullptr;
};

TEST_F(EdgertInferMetaTest, EveryBufferCarriesItsFramesResult) {
  std::map<guint64, std::string> messages;
  const std::vector<Frame> frames = run(12, &messages);
  ASSERT_EQ(frames.size(), 12u);
  ASSERT_EQ(messages.size(), 12u);
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i].number, i);
    EXPECT_NE(frames[i].json.find("\"type\":\"raw\""), std::string::npos) << frames[i].json;
    EXPECT_EQ(frames[i].json, messages[frames[i].number]) << "frame " << i << ": the meta and the bus message differ";
  }
}

TEST_F(EdgertInferMetaTest, ACameraEngineForOtherFramesFailsTheStreamSayingWhy) {
  GError* error = nullptr;
  pipeline_ = gst_parse_launch("videotestsrc num-buffers=5 ! video/x-raw,width=320,height=240 ! videoconvert ! "
                               "edgertinfer engine=" EDGERT_TEST_BINARY_DIR "/gst-work/camera_yuyv_322x240.engine ! "
                               "fakesink",
                               &error);
  ASSERT_EQ(error, nullptr) << error->message;
  ASSERT_NE(gst_element_set_state(pipeline_, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  GstBus* bus = gst_element_get_bus(pipeline_);
  std::string first_error;
  int results = 0;
  // Every message until the first error (or EOS, a failure here), 30 s at most.
  while (GstMessage* message = gst_bus_timed_pop(bus, 30 * GST_SECOND)) {
    const GstMessageType type = GST_MESSAGE_TYPE(message);
    const GstStructure* s = gst_message_get_structure(message);
    if (type == GST_MESSAGE_ELEMENT && gst_structure_has_name(s, "edgertinfer")) ++results;
    if (type == GST_MESSAGE_ERROR) {
      GError* e = nullptr;
      gst_message_parse_error(message, &e, nullptr);
      first_error = e->message;
      g_error_free(e);
    }
    gst_message_unref(message);
    if (type == GST_MESSAGE_ERROR || type == GST_MESSAGE_EOS) break;
  }
  gst_object_unref(bus);
  EXPECT_NE(first_error.find("the engine takes yuyv 322x240 frames (built with --camera)"), std::string::npos)
      << "first error: '" << first_error << "'";
  EXPECT_NE(first_error.find("the source delivers yuyv 320x240"), std::string::npos) << first_error;
  EXPECT_EQ(results, 0) << "frames were processed with caps the engine cannot take";
}

}  // namespace

// edgertd's Preprocessor (frame -> engine input tensor) and Postprocessor (engine outputs ->
// JSON) against independent computations: a plain floating-point reference of BT.601 colour
// conversion, half-pixel bilinear resize and mean/std normalisation, on frames of known random
// pixels (the seed is printed on failure; EDGERT_TEST_SEED replays it), and hand-worked
// expected results for detection, segmentation and raw outputs.
#include <gtest/gtest.h>
#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "postprocess.h"
#include "preprocess.h"

namespace edgert::daemon {
namespace {

uint32_t test_seed() {
  static const uint32_t seed = [] {
    const char* s = std::getenv("EDGERT_TEST_SEED");
    return s ? static_cast<uint32_t>(std::strtoul(s, nullptr, 10)) : std::random_device{}();
  }();
  return seed;
}

// An owned frame image in one of the camera formats, with rows padded past the pixels so a
// stride mistake reads the padding (filled with 0xEE) instead of the next row.
struct TestFrame {
  PixelFormat format;
  int width, height;
  std::vector<uint8_t> plane0, plane1;
  size_t stride0 = 0, stride1 = 0;
  Frame frame() const {
    Frame f;
    f.format = format;
    f.width = width, f.height = height;
    f.planes[0] = plane0.data();
    f.planes[1] = plane1.empty() ? nullptr : plane1.data();
    f.strides[0] = stride0, f.strides[1] = stride1;
    f.bytes_used = plane0.size();
    return f;
  }
};

TestFrame random_frame(PixelFormat format, int w, int h, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  TestFrame t{format, w, h, {}, {}, 0, 0};
  switch (format) {
    case PixelFormat::YUYV: t.stride0 = static_cast<size_t>(w) * 2 + 8; break;
    case PixelFormat::NV12: t.stride0 = w + 6, t.stride1 = w + 6; break;
    default: t.stride0 = static_cast<size_t>(w) * 3 + 5; break;
  }
  t.plane0.assign(t.stride0 * h, 0xEE);
  size_t row_bytes = format == PixelFormat::YUYV ? w * 2u : format == PixelFormat::NV12 ? w : w * 3u;
  for (int y = 0; y < h; ++y)
    for (size_t i = 0; i < row_bytes; ++i) t.plane0[y * t.stride0 + i] = static_cast<uint8_t>(byte(rng));
  if (format == PixelFormat::NV12) {
    t.plane1.assign(t.stride1 * (h / 2), 0xEE);
    for (int y = 0; y < h / 2; ++y)
      for (int i = 0; i < w; ++i) t.plane1[y * t.stride1 + i] = static_cast<uint8_t>(byte(rng));
  }
  return t;
}

// The reference: full-precision BT.601 limited range (ITU-R BT.601 coefficients, not the
// daemon's fixed-point ones), clamped to [0, 255] like any 8-bit RGB.
void reference_rgb(const TestFrame& t, int x, int y, double rgb[3]) {
  double Y, U, V;
  if (t.format == PixelFormat::YUYV) {
    const uint8_t* p = &t.plane0[y * t.stride0 + (x / 2) * 4];
    Y = p[(x % 2) * 2], U = p[1], V = p[3];
  } else if (t.format == PixelFormat::NV12) {
    Y = t.plane0[y * t.stride0 + x];
    const uint8_t* uv = &t.plane1[(y / 2) * t.stride1 + (x / 2) * 2];
    U = uv[0], V = uv[1];
  } else {
    const uint8_t* p = &t.plane0[y * t.stride0 + x * 3];
    for (int c = 0; c < 3; ++c) rgb[c] = p[c];
    return;
  }
  double c = 1.164383 * (Y - 16), d = U - 128, e = V - 128;
  double out[3] = {c + 1.596027 * e, c - 0.391762 * d - 0.812968 * e, c + 2.017232 * d};
  for (int i = 0; i < 3; ++i) rgb[i] = std::clamp(out[i], 0.0, 255.0);
}

// Half-pixel-centre bilinear sample (align_corners=false, edge clamped), as OpenCV's resize.
void reference_sample(const TestFrame& t, int ox, int oy, int out_w, int out_h, double rgb[3]) {
  auto axis = [](int o, int in, int out, int* i0, int* i1, double* w) {
    double s = std::max(0.0, (o + 0.5) * in / out - 0.5);
    *i0 = std::min(static_cast<int>(s), in - 1);
    *i1 = std::min(*i0 + 1, in - 1);
    *w = s - *i0;
  };
  int x0, x1, y0, y1;
  double wx, wy;
  axis(ox, t.width, out_w, &x0, &x1, &wx);
  axis(oy, t.height, out_h, &y0, &y1, &wy);
  double a[3], b[3], c[3], d[3];
  reference_rgb(t, x0, y0, a), reference_rgb(t, x1, y0, b), reference_rgb(t, x0, y1, c), reference_rgb(t, x1, y1, d);
  for (int i = 0; i < 3; ++i)
    rgb[i] = (a[i] * (1 - wx) + b[i] * wx) * (1 - wy) + (c[i] * (1 - wx) + d[i] * wx) * wy;
}

struct Case {
  PixelFormat format;
  int in_w, in_h, out_w, out_h;
  bool nchw;
  std::string order;
};

// The fixed-point colour conversion and the 10-bit interpolation weights may differ from the
// reference by about one 8-bit step; any real mistake (swapped planes or channels, wrong stride,
// wrong normalisation) is off by tens of steps.
constexpr double kTolerance8Bit = 1.5;

void check_against_reference(const Case& k) {
  std::mt19937 rng(test_seed());
  TestFrame t = random_frame(k.format, k.in_w, k.in_h, rng);
  PreprocessConfig cfg;
  cfg.channel_order = k.order;
  cfg.mean = {0.485f, 0.456f, 0.406f};
  cfg.std = {0.229f, 0.224f, 0.225f};
  Preprocessor pre(cfg);
  InputLayout layout;
  layout.nchw = k.nchw, layout.channels = 3, layout.width = k.out_w, layout.height = k.out_h;
  const size_t plane = static_cast<size_t>(k.out_w) * k.out_h;
  std::vector<float> out(plane * 3, NAN);
  EXPECT_EQ(pre.run(t.frame(), layout, out.data()), 0u) << "no extra copy for an uncompressed frame";
  int bad = 0;
  for (int y = 0; y < k.out_h; ++y)
    for (int x = 0; x < k.out_w; ++x) {
      double rgb[3];
      reference_sample(t, x, y, k.out_w, k.out_h, rgb);
      for (int ch = 0; ch < 3; ++ch) {
        double pixel = rgb[k.order == "bgr" ? 2 - ch : ch];
        double want = (pixel / 255.0 - cfg.mean[ch]) / cfg.std[ch];
        size_t at = k.nchw ? ch * plane + y * k.out_w + x : (static_cast<size_t>(y) * k.out_w + x) * 3 + ch;
        double tol = kTolerance8Bit / 255.0 / cfg.std[ch];
        if (!(std::fabs(out[at] - want) <= tol) && ++bad <= 5)
          ADD_FAILURE() << pixel_format_name(k.format) << " " << k.in_w << "x" << k.in_h << " -> " << k.out_w << "x"
                        << k.out_h << (k.nchw ? " NCHW " : " NHWC ") << k.order << ": output (" << x << ", " << y
                        << ") channel " << ch << " is " << out[at] << ", reference " << want << " (seed "
                        << test_seed() << ", EDGERT_TEST_SEED replays it)";
      }
    }
  EXPECT_EQ(bad, 0) << "values off the reference (seed " << test_seed() << ")";
}

TEST(Preprocess, YuyvToNchwRgbMatchesReference) { check_against_reference({PixelFormat::YUYV, 20, 14, 20, 14, true, "rgb"}); }
TEST(Preprocess, YuyvDownscaleToNhwcBgrMatchesReference) {
  check_against_reference({PixelFormat::YUYV, 64, 48, 24, 16, false, "bgr"});
}
TEST(Preprocess, Nv12UpscaleToNchwRgbMatchesReference) { check_against_reference({PixelFormat::NV12, 16, 10, 37, 23, true, "rgb"}); }
TEST(Preprocess, Nv12ToNchwBgrMatchesReference) { check_against_reference({PixelFormat::NV12, 30, 20, 30, 20, true, "bgr"}); }
TEST(Preprocess, Rgb24ResizeToNhwcRgbMatchesReference) {
  check_against_reference({PixelFormat::RGB24, 33, 21, 16, 16, false, "rgb"});
}
TEST(Preprocess, Rgb24ToNchwBgrMatchesReference) { check_against_reference({PixelFormat::RGB24, 12, 9, 12, 9, true, "bgr"}); }

// Exact values a user can check by hand: one grey and one pure-red RGB24 pixel at the same size,
// default normalisation ([0, 1]) and ImageNet's.
TEST(Preprocess, KnownPixelsGiveKnownValues) {
  const uint8_t pixels[6] = {255, 0, 0, 128, 128, 128};
  Frame f;
  f.format = PixelFormat::RGB24;
  f.width = 2, f.height = 1;
  f.planes[0] = pixels;
  f.strides[0] = 6;
  InputLayout layout;
  layout.width = 2, layout.height = 1;
  float out[6];
  Preprocessor plain{PreprocessConfig{}};
  plain.run(f, layout, out);
  const float want_plain[6] = {1, 128 / 255.0f, 0, 128 / 255.0f, 0, 128 / 255.0f};  // NCHW: R R G G B B
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out[i], want_plain[i], 1e-6) << "element " << i;

  PreprocessConfig imagenet;
  imagenet.channel_order = "bgr";
  imagenet.mean = {0.5f, 0.25f, 0.125f};
  imagenet.std = {0.5f, 0.25f, 2.0f};
  Preprocessor pre(imagenet);
  pre.run(f, layout, out);
  // Channel 0 is blue now, normalised with mean[0]/std[0]: the config's lists follow the
  // model's channel order.
  const float want[6] = {(0 - 0.5f) / 0.5f,    (128 / 255.0f - 0.5f) / 0.5f, (0 - 0.25f) / 0.25f,
                         (128 / 255.0f - 0.25f) / 0.25f, (1 - 0.125f) / 2.0f, (128 / 255.0f - 0.125f) / 2.0f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out[i], want[i], 1e-5) << "element " << i;
}

// One-channel models get luma: the Y plane itself for YUV frames.
TEST(Preprocess, OneChannelModelGetsLuma) {
  std::mt19937 rng(test_seed());
  TestFrame t = random_frame(PixelFormat::NV12, 8, 6, rng);
  PreprocessConfig cfg;
  cfg.mean = {0.5f, 0, 0};
  cfg.std = {0.25f, 1, 1};
  Preprocessor pre(cfg);
  InputLayout layout;
  layout.channels = 1, layout.width = 8, layout.height = 6;
  std::vector<float> out(48);
  pre.run(t.frame(), layout, out.data());
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 8; ++x)
      EXPECT_NEAR(out[y * 8 + x], (t.plane0[y * t.stride0 + x] / 255.0 - 0.5) / 0.25, 1e-5)
          << "(" << x << ", " << y << ") seed " << test_seed();
}

TEST(Preprocess, LayoutFromEngineShape) {
  const int64_t nchw[4] = {1, 3, 224, 200}, nhwc[4] = {1, 96, 128, 3}, dynamic[4] = {1, 1, -1, -1}, odd[4] = {1, 5, 5, 5};
  InputLayout l = layout_for(nchw, 4, 640, 480);
  EXPECT_TRUE(l.nchw);
  EXPECT_EQ(l.channels, 3);
  EXPECT_EQ(l.width, 200);
  EXPECT_EQ(l.height, 224);
  l = layout_for(nhwc, 4, 640, 480);
  EXPECT_FALSE(l.nchw);
  EXPECT_EQ(l.width, 128);
  EXPECT_EQ(l.height, 96);
  l = layout_for(dynamic, 4, 640, 480);
  EXPECT_EQ(l.channels, 1);
  EXPECT_EQ(l.width, 640) << "a dynamic width takes the frame's";
  EXPECT_EQ(l.height, 480);
  EXPECT_THROW(layout_for(odd, 4, 640, 480), std::runtime_error);
  EXPECT_THROW(layout_for(nchw, 3, 640, 480), std::runtime_error);
}

// A baseline JPEG of known content, made with libjpeg at quality 100 (4:4:4): the decoded frame
// must be preprocessed like the same RGB24 image, within JPEG's own loss.
std::vector<uint8_t> encode_jpeg(const std::vector<uint8_t>& rgb, int w, int h) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = w, cinfo.image_height = h, cinfo.input_components = 3, cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 100, TRUE);
  for (int c = 0; c < 3; ++c) cinfo.comp_info[c].h_samp_factor = cinfo.comp_info[c].v_samp_factor = 1;
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(rgb.data()) + static_cast<size_t>(cinfo.next_scanline) * w * 3;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> out(buffer, buffer + size);
  free(buffer);
  jpeg_destroy_compress(&cinfo);
  return out;
}

TEST(Preprocess, MjpegDecodesToTheEncodedImage) {
  const int w = 32, h = 16;
  // Smooth colour ramps: JPEG at quality 100 keeps these within a few steps.
  std::vector<uint8_t> rgb(w * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &rgb[(y * w + x) * 3];
      p[0] = static_cast<uint8_t>(x * 8), p[1] = static_cast<uint8_t>(y * 16), p[2] = static_cast<uint8_t>(200 - x * 4);
    }
  std::vector<uint8_t> jpeg = encode_jpeg(rgb, w, h);
  Frame f;
  f.format = PixelFormat::MJPEG;
  f.width = w, f.height = h;
  f.planes[0] = jpeg.data();
  f.bytes_used = jpeg.size();
  InputLayout layout;
  layout.width = w, layout.height = h;
  std::vector<float> out(w * h * 3);
  Preprocessor pre{PreprocessConfig{}};
  EXPECT_EQ(pre.run(f, layout, out.data()), 1u) << "MJPEG decodes into one scratch image";
  double worst = 0;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < w * h; ++i) worst = std::max(worst, std::fabs(out[c * w * h + i] * 255.0 - rgb[i * 3 + c]));
  EXPECT_LE(worst, 4.0) << "largest difference from the encoded pixels, in 8-bit steps";

  // A frame whose JPEG has another size than the negotiated format, and a corrupt one, are errors.
  f.width = w * 2;
  EXPECT_THROW(pre.run(f, layout, out.data()), std::runtime_error);
  f.width = w;
  std::vector<uint8_t> truncated(jpeg.begin(), jpeg.begin() + 20);
  f.planes[0] = truncated.data();
  f.bytes_used = truncated.size();
  EXPECT_THROW(pre.run(f, layout, out.data()), std::runtime_error);
}

edgert_tensor tensor(const std::vector<float>& data, std::vector<int64_t> dims) {
  edgert_tensor t{};
  t.dtype = EDGERT_DTYPE_FLOAT32;
  t.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) t.dims[i] = dims[i];
  t.data = const_cast<float*>(data.data());
  return t;
}

TEST(Postprocess, TorchvisionDetectionKeepsScoresAboveThreshold) {
  PostprocessConfig cfg;
  cfg.type = "detection";
  cfg.score_threshold = 0.5f;
  Postprocessor post(cfg);
  std::vector<float> boxes = {10, 20, 30, 40, 1, 2, 3, 4, 50, 60, 70, 80};
  std::vector<float> scores = {0.9f, 0.3f, 0.5f};
  std::vector<int64_t> labels = {7, 2, 3};
  edgert_tensor l{};
  l.dtype = EDGERT_DTYPE_INT64, l.rank = 1, l.dims[0] = 3, l.data = labels.data();
  Result r;
  post.run({tensor(boxes, {3, 4}), tensor(scores, {3}), l}, {"boxes", "scores", "labels"}, 320, 240, &r);
  const nlohmann::json want = nlohmann::json::parse(R"({"type": "detection", "image": [320, 240], "objects": [
      {"class": 7, "label": "7", "score": 0.9, "box": [10, 20, 30, 40]},
      {"class": 3, "label": "3", "score": 0.5, "box": [50, 60, 70, 80]}]})");
  ASSERT_EQ(r.payload["objects"].size(), 2u) << r.payload.dump();
  EXPECT_EQ(r.payload["type"], want["type"]);
  EXPECT_EQ(r.payload["image"], want["image"]);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.payload["objects"][i]["class"], want["objects"][i]["class"]) << r.payload.dump();
    EXPECT_EQ(r.payload["objects"][i]["label"], want["objects"][i]["label"]);
    EXPECT_NEAR(r.payload["objects"][i]["score"].get<double>(), want["objects"][i]["score"].get<double>(), 1e-6);
    EXPECT_EQ(r.payload["objects"][i]["box"], want["objects"][i]["box"]);
  }
  ASSERT_EQ(r.detections.size(), 2u);
  EXPECT_EQ(r.detections[1].class_id, 3);
  EXPECT_FLOAT_EQ(r.detections[1].box[2], 70);
}

TEST(Postprocess, YoloDetectionDecodesBoxesAndSuppressesOverlaps) {
  PostprocessConfig cfg;
  cfg.type = "detection";
  cfg.score_threshold = 0.4f;
  cfg.iou_threshold = 0.45f;
  Postprocessor post(cfg);
  // [1, 4, 5 + 2]: cx, cy, w, h, objectness, class 0, class 1.
  std::vector<float> rows = {
      50, 50, 20, 20, 0.9f, 0.1f, 1.0f,  // class 1, score 0.9, box 40..60
      52, 50, 20, 20, 0.8f, 0.0f, 1.0f,  // class 1, 0.8, overlaps the first (IoU ~0.82): suppressed
      51, 50, 20, 20, 0.7f, 1.0f, 0.0f,  // class 0, 0.7: same place, other class, kept
      10, 10, 4, 4, 0.5f, 0.5f, 0.5f,    // 0.25 < threshold: dropped
  };
  Result r;
  post.run({tensor(rows, {1, 4, 7})}, {"out"}, 100, 100, &r);
  const nlohmann::json& objects = r.payload["objects"];
  ASSERT_EQ(objects.size(), 2u) << r.payload.dump();
  EXPECT_EQ(objects[0]["class"], 1);
  EXPECT_NEAR(objects[0]["score"].get<double>(), 0.9, 1e-6);
  EXPECT_EQ(objects[0]["box"], nlohmann::json::parse("[40, 40, 60, 60]"));
  EXPECT_EQ(objects[1]["class"], 0);
  EXPECT_NEAR(objects[1]["score"].get<double>(), 0.7, 1e-6);
  EXPECT_EQ(objects[1]["box"], nlohmann::json::parse("[41, 40, 61, 60]"));
}

TEST(Postprocess, DetectionRefusesOutputsItCannotRead) {
  PostprocessConfig cfg;
  cfg.type = "detection";
  Postprocessor post(cfg);
  std::vector<float> v(10);
  Result r;
  EXPECT_THROW(post.run({tensor(v, {1, 10})}, {"x"}, 1, 1, &r), std::runtime_error);
}

TEST(Postprocess, SegmentationSummarisesArgmaxFractions) {
  PostprocessConfig cfg;
  cfg.type = "segmentation";
  Postprocessor post(cfg);
  // [1, 3, 2, 4]: 8 pixels; argmax class 2 on 5, class 0 on 3, class 1 on none.
  std::vector<float> s = {
      9, 9, 9, 0, 0, 0, 0, 0,  // class 0
      1, 1, 1, 1, 1, 1, 1, 1,  // class 1
      0, 0, 0, 5, 5, 5, 5, 5,  // class 2
  };
  Result r;
  post.run({tensor(s, {1, 3, 2, 4})}, {"out"}, 4, 2, &r);
  EXPECT_EQ(r.payload["type"], "segmentation");
  EXPECT_EQ(r.payload["size"], nlohmann::json::parse("[4, 2]")) << "width, height";
  const nlohmann::json& classes = r.payload["classes"];
  ASSERT_EQ(classes.size(), 2u) << r.payload.dump();
  EXPECT_EQ(classes[0]["class"], 2);
  EXPECT_DOUBLE_EQ(classes[0]["fraction"].get<double>(), 5 / 8.0);
  EXPECT_EQ(classes[1]["class"], 0);
  EXPECT_DOUBLE_EQ(classes[1]["fraction"].get<double>(), 3 / 8.0);
  EXPECT_THROW(post.run({tensor(s, {3, 8})}, {"out"}, 4, 2, &r), std::runtime_error);
}

TEST(Postprocess, RawListsEveryOutputsShapeAndFirstSixteenValues) {
  PostprocessConfig cfg;
  cfg.type = "raw";
  Postprocessor post(cfg);
  std::vector<float> a(20), b = {0.5f, -2};
  for (int i = 0; i < 20; ++i) a[i] = i * 0.25f;
  Result r;
  post.run({tensor(a, {1, 4, 5}), tensor(b, {2})}, {"features", "bias"}, 1, 1, &r);
  EXPECT_EQ(r.payload["type"], "raw");
  const nlohmann::json& outs = r.payload["outputs"];
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0]["name"], "features");
  EXPECT_EQ(outs[0]["shape"], nlohmann::json::parse("[1, 4, 5]"));
  ASSERT_EQ(outs[0]["values"].size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_DOUBLE_EQ(outs[0]["values"][i].get<double>(), i * 0.25);
  EXPECT_EQ(outs[1]["name"], "bias");
  EXPECT_EQ(outs[1]["values"], nlohmann::json::parse("[0.5, -2.0]"));
}

}  // namespace
}  // namespace edgert::daemon

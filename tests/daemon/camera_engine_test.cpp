// Camera engines (`edgert build --camera`, builder/src/camera_input.h) against edgertd's own
// preprocessing: for every camera format, on random frames of odd sizes, a camera engine fed
// the raw frame computes what the plain engine computes on the Preprocessor's tensor of the
// same frame. And what is refused: models without a fixed image input, bad --camera specs,
// frames of another size.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "build_error.h"
#include "engine_test_fixture.h"
#include "preprocess.h"

namespace edgert::test {
namespace {

std::vector<float> seeded(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// image [1, C, H, W] (or [1, H, W, C] with nhwc) -> 3x3 Conv -> y.
onnx::ModelProto image_net(int64_t channels, int64_t h, int64_t w, bool nhwc) {
  GraphMaker g;
  std::string into = "image";
  if (nhwc) {
    g.input("image", {1, h, w, channels});
    GraphMaker::attr(g.node("Transpose", {"image"}, {"planar"}, "to_nchw"), "perm", std::vector<int64_t>{0, 3, 1, 2});
    into = "planar";
  } else {
    g.input("image", {1, channels, h, w});
  }
  g.floats("w", {4, channels, 3, 3}, seeded(static_cast<size_t>(4 * channels * 9), 3));
  GraphMaker::attr(g.node("Conv", {into, "w"}, {"y"}, "conv"), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.output("y");
  return g.model();
}

class CameraEngine : public BuiltEngineTest {
 protected:
  std::unique_ptr<LoadedEngine> build(const onnx::ModelProto& model, std::optional<builder::CameraInput> camera) {
    return BuiltEngineTest::build(model, [&](builder::BuildOptions& options) { options.camera = std::move(camera); });
  }

  static std::vector<float> run(const LoadedEngine& engine, edgert_dtype dtype, std::vector<int64_t> dims, void* data,
                                edgert_status expect = EDGERT_OK, std::string* message = nullptr) {
    std::unique_ptr<ExecutionContext> context = run_once(engine, dtype, dims, data, expect, message);
    if (!context) return {};
    const edgert_tensor& y = context->output(0);
    int64_t n = 1;
    for (int32_t d = 0; d < y.rank; ++d) n *= y.dims[d];
    const float* p = static_cast<const float*>(y.data);
    return std::vector<float>(p, p + n);
  }
};

TEST_F(CameraEngine, ComputesWhatPreprocessingThenTheModelComputes) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> byte(0, 255);
  struct Case {
    const char* format;
    daemon::PixelFormat pixel_format;
    int width, height, out_w, out_h, channels;
    const char* order;
    bool nhwc;
  };
  for (const Case& c : {Case{"yuyv", daemon::PixelFormat::YUYV, 38, 23, 16, 12, 3, "rgb", false},
                        Case{"yuyv", daemon::PixelFormat::YUYV, 14, 9, 29, 31, 3, "bgr", true},
                        Case{"nv12", daemon::PixelFormat::NV12, 22, 30, 9, 17, 3, "rgb", false},
                        Case{"nv12", daemon::PixelFormat::NV12, 10, 8, 8, 8, 1, "rgb", false},
                        Case{"rgb24", daemon::PixelFormat::RGB24, 37, 19, 23, 11, 3, "bgr", false}}) {
    SCOPED_TRACE(std::string(c.format) + " " + std::to_string(c.width) + "x" + std::to_string(c.height));
    const onnx::ModelProto model = image_net(c.channels, c.out_h, c.out_w, c.nhwc);
    builder::CameraInput camera = builder::parse_camera_input(std::string(c.format) + ":" + std::to_string(c.width) +
                                                              "x" + std::to_string(c.height));
    camera.channel_order = c.order;
    camera.mean = {0.485f, 0.456f, 0.406f};
    camera.std = {0.229f, 0.224f, 0.225f};
    auto plain = build(model, std::nullopt);
    auto with_camera = build(model, camera);
    ASSERT_TRUE(plain && with_camera);

    // The frame, rows packed as the engine takes them.
    const bool nv12 = c.pixel_format == daemon::PixelFormat::NV12;
    const size_t row = nv12 ? c.width : c.width * (c.pixel_format == daemon::PixelFormat::YUYV ? 2u : 3u);
    std::vector<uint8_t> bytes(row * (nv12 ? c.height * 3 / 2 : c.height));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
    daemon::Frame frame;
    frame.format = c.pixel_format;
    frame.width = c.width, frame.height = c.height;
    frame.planes[0] = bytes.data();
    frame.strides[0] = row;
    if (nv12) frame.planes[1] = bytes.data() + static_cast<size_t>(c.width) * c.height, frame.strides[1] = c.width;
    frame.bytes_used = bytes.size();

    daemon::PreprocessConfig config;
    config.channel_order = c.order;
    config.mean = camera.mean;
    config.std = camera.std;
    daemon::InputLayout layout;
    layout.nchw = !c.nhwc;
    layout.channels = c.channels;
    layout.width = c.out_w, layout.height = c.out_h;
    std::vector<float> image(static_cast<size_t>(c.channels) * c.out_w * c.out_h);
    daemon::Preprocessor(config).run(frame, layout, image.data());

    const std::vector<int64_t> image_dims = c.nhwc ? std::vector<int64_t>{1, c.out_h, c.out_w, c.channels}
                                                   : std::vector<int64_t>{1, c.channels, c.out_h, c.out_w};
    const std::vector<int64_t> frame_dims = nv12 ? std::vector<int64_t>{c.height * 3 / 2, c.width}
                                                 : std::vector<int64_t>{c.height, c.width, static_cast<int64_t>(row / c.width)};
    const std::vector<float> want = run(*plain, EDGERT_DTYPE_FLOAT32, image_dims, image.data());
    const std::vector<float> got = run(*with_camera, EDGERT_DTYPE_UINT8, frame_dims, bytes.data());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5f * (1 + std::fabs(want[i]))) << "output element " << i;
  }
}

TEST_F(CameraEngine, AFrameOfAnotherSizeIsRefused) {
  auto engine = build(image_net(3, 8, 8, false), builder::parse_camera_input("yuyv:16x12"));
  ASSERT_TRUE(engine);
  std::vector<uint8_t> bytes(20 * 12 * 2);
  std::string message;
  run(*engine, EDGERT_DTYPE_UINT8, {12, 20, 2}, bytes.data(), EDGERT_ERR_SHAPE, &message);
  EXPECT_NE(message.find("input"), std::string::npos) << message;
}

TEST_F(CameraEngine, ModelsWithoutAFixedImageInputAndBadSpecsAreRefused) {
  GraphMaker g;
  g.input("x", {-1, 3, 8, 8});
  g.node("Relu", {"x"}, {"y"}, "relu");
  g.output("y");
  try {
    build(g.model(), builder::parse_camera_input("nv12:16x16"));
    ADD_FAILURE() << "a dynamic input took a camera";
  } catch (const builder::BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' is not a float32 image"), std::string::npos) << e.what();
  }
  for (const char* spec : {"yuv:16x16", "yuyv", "yuyv:15x16", "nv12:16x15", "rgb24:0x4", "rgb24:4x4x4", "rgb24:99999x4"})
    EXPECT_THROW(builder::parse_camera_input(spec), builder::BuildError) << spec;
  EXPECT_NO_THROW(builder::parse_camera_input("rgb24:15x7"));
}

}  // namespace
}  // namespace edgert::test

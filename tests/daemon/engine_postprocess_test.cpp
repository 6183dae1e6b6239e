// Postprocessing inside the engine (`edgert build --postprocess`, builder/src/output_postprocess.h)
// against edgertd's postprocessing of the full scores: on random inputs, the top-k an engine
// ending in Softmax + TopK reports, and the class map of one ending in ArgMax, give edgertd's
// Postprocessor the results it computes from the plain engine's scores. And what is refused:
// outputs of the wrong rank, several outputs, K past the classes, bad specs.
#include <gtest/gtest.h>

#include <random>

#include "build_error.h"
#include "engine_test_fixture.h"
#include "postprocess.h"

namespace edgert::test {
namespace {

std::vector<float> seeded(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// x [1, 8] -> MatMul -> logits [1, classes] (-> Softmax -> probabilities).
onnx::ModelProto classifier(int64_t classes, bool softmax) {
  GraphMaker g;
  g.input("x", {1, 8});
  g.floats("w", {8, classes}, seeded(static_cast<size_t>(8 * classes), 5, 1.0f));
  g.node("MatMul", {"x", "w"}, {"logits"}, "fc");
  if (softmax) GraphMaker::attr(g.node("Softmax", {"logits"}, {"probabilities"}, "softmax"), "axis", int64_t{-1});
  g.output(softmax ? "probabilities" : "logits");
  return g.model();
}

// image [1, 3, 9, 11] -> 3x3 Conv -> scores [1, classes, 9, 11].
onnx::ModelProto segmenter(int64_t classes) {
  GraphMaker g;
  g.input("image", {1, 3, 9, 11});
  g.floats("w", {classes, 3, 3, 3}, seeded(static_cast<size_t>(classes * 27), 7, 0.5f));
  GraphMaker::attr(g.node("Conv", {"image", "w"}, {"scores"}, "conv"), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.output("scores");
  return g.model();
}

std::vector<edgert_tensor> outputs_of(const LoadedEngine& engine, const ExecutionContext& context) {
  std::vector<edgert_tensor> outputs;
  for (size_t o = 0; o < engine.output_names().size(); ++o) outputs.push_back(context.output(static_cast<int32_t>(o)));
  return outputs;
}

class EnginePostprocess : public BuiltEngineTest {
 protected:
  std::unique_ptr<LoadedEngine> build(const onnx::ModelProto& model, const std::string& postprocess) {
    return BuiltEngineTest::build(model, [&](builder::BuildOptions& options) {
      if (!postprocess.empty()) options.postprocess = builder::parse_output_postprocess(postprocess);
    });
  }

  // edgertd's result for the engine's outputs on `input`.
  static daemon::Result postprocessed(const LoadedEngine& engine, const daemon::PostprocessConfig& config,
                                      std::vector<int64_t> dims, std::vector<float>& input) {
    std::unique_ptr<ExecutionContext> context = run_once(engine, EDGERT_DTYPE_FLOAT32, dims, input.data());
    daemon::Result result;
    if (!context) return result;
    daemon::Postprocessor(config).run(outputs_of(engine, *context), engine.output_names(), 11, 9, &result);
    return result;
  }
};

TEST_F(EnginePostprocess, TopKInTheEngineIsWhatEdgertdComputesFromTheScores) {
  for (bool softmax : {false, true}) {
    for (int64_t k : {1, 5, 37}) {
      SCOPED_TRACE((softmax ? "probabilities, k " : "logits, k ") + std::to_string(k));
      const onnx::ModelProto model = classifier(37, softmax);
      auto plain = build(model, "");
      auto reduced = build(model, "classification:" + std::to_string(k));
      ASSERT_TRUE(plain && reduced);
      ASSERT_EQ(reduced->output_names(), (std::vector<std::string>{"scores", "classes"}));
      daemon::PostprocessConfig config;
      config.type = "classification";
      config.top_k = static_cast<int>(k);
      for (uint32_t seed = 0; seed < 12; ++seed) {
        std::vector<float> x = seeded(8, 100 + seed, 2.0f);
        const daemon::Result want = postprocessed(*plain, config, {1, 8}, x);
        const daemon::Result got = postprocessed(*reduced, config, {1, 8}, x);
        ASSERT_EQ(got.detections.size(), static_cast<size_t>(k));
        ASSERT_EQ(want.detections.size(), got.detections.size());
        for (size_t i = 0; i < want.detections.size(); ++i) {
          EXPECT_EQ(got.detections[i].class_id, want.detections[i].class_id) << "seed " << seed << ", rank " << i;
          EXPECT_NEAR(got.detections[i].score, want.detections[i].score, 2e-6f) << "seed " << seed << ", rank " << i;
        }
      }
    }
  }
}

TEST_F(EnginePostprocess, ClassMapInTheEngineIsWhatEdgertdComputesFromTheScores) {
  const onnx::ModelProto model = segmenter(6);
  auto plain = build(model, "");
  auto reduced = build(model, "segmentation");
  ASSERT_TRUE(plain && reduced);
  ASSERT_EQ(reduced->output_names(), std::vector<std::string>{"class_map"});
  daemon::PostprocessConfig config;
  config.type = "segmentation";
  for (uint32_t seed = 0; seed < 8; ++seed) {
    std::vector<float> image = seeded(3 * 9 * 11, 200 + seed, 1.0f);
    std::unique_ptr<ExecutionContext> scores = run_once(*plain, EDGERT_DTYPE_FLOAT32, {1, 3, 9, 11}, image.data());
    std::unique_ptr<ExecutionContext> map = run_once(*reduced, EDGERT_DTYPE_FLOAT32, {1, 3, 9, 11}, image.data());
    ASSERT_TRUE(scores && map);
    const edgert_tensor& m = map->output(0);
    ASSERT_EQ(m.dtype, EDGERT_DTYPE_INT64);
    ASSERT_EQ(std::vector<int64_t>(m.dims, m.dims + m.rank), (std::vector<int64_t>{1, 1, 9, 11}));
    const float* s = static_cast<const float*>(scores->output(0).data);
    for (int64_t p = 0; p < 99; ++p) {
      int64_t best = 0;
      for (int64_t c = 1; c < 6; ++c)
        if (s[c * 99 + p] > s[best * 99 + p]) best = c;
      ASSERT_EQ(static_cast<const int64_t*>(m.data)[p], best) << "seed " << seed << ", pixel " << p;
    }
    const daemon::Result want = postprocessed(*plain, config, {1, 3, 9, 11}, image);
    const daemon::Result got = postprocessed(*reduced, config, {1, 3, 9, 11}, image);
    EXPECT_EQ(got.payload, want.payload) << "seed " << seed;
  }
}

TEST_F(EnginePostprocess, OutputsItCannotReduceAndBadSpecsAreRefused) {
  auto refused = [&](const onnx::ModelProto& model, const std::string& spec, const std::string& why) {
    try {
      build(model, spec);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const builder::BuildError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(segmenter(4), "classification", "output 'scores' is not scores [N, classes]");
  refused(classifier(10, false), "segmentation", "output 'logits' is not scores [N, classes, H, W]");
  refused(classifier(10, false), "classification:11", "has 10 classes");
  GraphMaker two;
  two.input("x", {1, 4});
  two.node("Relu", {"x"}, {"a"}, "a");
  two.node("Neg", {"x"}, {"b"}, "b");
  two.output("a");
  two.output("b");
  refused(two.model(), "classification", "the model has 2 outputs");
  for (const char* spec : {"classification:0", "classification:x", "classification:", "segmentation:2", "detection", ""})
    EXPECT_THROW(builder::parse_output_postprocess(spec), builder::BuildError) << spec;
  EXPECT_EQ(builder::parse_output_postprocess("classification").top_k, 5);
  EXPECT_EQ(builder::parse_output_postprocess("classification:1000").top_k, 1000);
}

}  // namespace
}  // namespace edgert::test

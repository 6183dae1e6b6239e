// The FP16 accuracy check's measure (fp16_accuracy.h): the largest relative L2 distance between
// two sets of runs. The search itself runs on the GPU machine (tests/gpu/gpu_engine_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fp16_accuracy.h"

namespace edgert::builder {
namespace {

SelfTestVector run_of(std::vector<std::pair<std::string, std::vector<float>>> outputs) {
  SelfTestVector run;
  for (auto& [name, data] : outputs) {
    SelfTestTensor t;
    t.name = name;
    t.shape = {static_cast<int64_t>(data.size())};
    t.data = std::move(data);
    run.outputs.push_back(std::move(t));
  }
  return run;
}

TEST(Fp16Accuracy, TheLargestRelativeDistanceOverRunsAndOutputsCounts) {
  std::vector<SelfTestVector> reference = {run_of({{"a", {3, 4}}, {"b", {1, 0}}}), run_of({{"a", {0, 5}}, {"b", {2, 0}}})};
  // a: |(0.03, 0.04)| / 5 = 0.01 in the first run; b: 0.1 / 2 = 0.05 in the second.
  std::vector<SelfTestVector> candidate = {run_of({{"b", {1, 0}}, {"a", {3.03f, 4.04f}}}),
                                           run_of({{"a", {0, 5}}, {"b", {2.1f, 0}}})};
  EXPECT_NEAR(largest_relative_error(reference, candidate), 0.05, 1e-6);
  EXPECT_EQ(largest_relative_error(reference, reference), 0.0);
}

TEST(Fp16Accuracy, MissingOutputsOtherShapesAndNonFiniteValuesAreUnbounded) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<SelfTestVector> reference = {run_of({{"a", {1, 2}}})};
  EXPECT_EQ(largest_relative_error(reference, {run_of({{"z", {1, 2}}})}), inf);
  EXPECT_EQ(largest_relative_error(reference, {run_of({{"a", {1, 2, 3}}})}), inf);
  EXPECT_EQ(largest_relative_error(reference, {run_of({{"a", {1, std::nanf("")}}})}), inf);
  EXPECT_EQ(largest_relative_error(reference, {}), inf);
  // An all-zero reference: equal or unbounded.
  std::vector<SelfTestVector> zeros = {run_of({{"a", {0, 0}}})};
  EXPECT_EQ(largest_relative_error(zeros, zeros), 0.0);
  EXPECT_EQ(largest_relative_error(zeros, {run_of({{"a", {0, 1e-9f}}})}), inf);
}

}  // namespace
}  // namespace edgert::builder

// ArgMax, ArgMin and TopK on the GPU against the CPU plugin's reference kernels
// (gpu_test_support.h says what is compared and how): odd sizes, the axis first, in the middle
// and last (negative too), keepdims 0 and 1, select_last_index over deliberate ties (a few
// levels of values, +0 beside -0), NaNs, K = 1, K between and K = the axis length, largest 0
// and 1, and rows of every length each op's kernels split on; float32 and float16, and
// channels-last where the arg kernels take it. Indices compare exactly, and so do values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"

namespace edgert::gpu_test {
namespace {

GpuCase make(const std::string& op, std::vector<CaseInput> inputs, NodeSpec attributes = {}, int32_t opset = 13) {
  return make_case(op, std::move(inputs), std::move(attributes), opset);
}

void run_both(GpuCase c) { run_float32_and_float16(std::move(c)); }

int64_t count_of(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Values from `levels` steps of 0.25 around zero, a zero being -0 half the time: most elements
// tie with others (exact in float16 too).
HostTensor tied(Dims dims, std::mt19937& rng, int levels) {
  std::uniform_int_distribution<int> level(0, levels - 1), sign(0, 1);
  std::vector<float> values(static_cast<size_t>(count_of(dims)));
  for (float& v : values) {
    v = 0.25f * static_cast<float>(level(rng) - levels / 2);
    if (v == 0.f && sign(rng)) v = -0.f;
  }
  return HostTensor::floats(std::move(dims), values);
}

// Uniform values with NaN at every element whose flat index is `phase` modulo `period`.
HostTensor with_nans(Dims dims, std::mt19937& rng, int64_t period, int64_t phase) {
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<float> values(static_cast<size_t>(count_of(dims)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<int64_t>(i) % period == phase ? std::numeric_limits<float>::quiet_NaN() : uniform(rng);
  return HostTensor::floats(std::move(dims), values);
}

GpuCase arg(const char* op, HostTensor x, int64_t axis, int64_t keepdims, int64_t select_last) {
  NodeSpec attributes =
      NodeSpec().integer("axis", axis).integer("keepdims", keepdims).integer("select_last_index", select_last);
  GpuCase c = make(op, {input(std::move(x))}, attributes);
  c.label = "axis " + std::to_string(axis) + " keepdims " + std::to_string(keepdims) + " select_last_index " +
            std::to_string(select_last);
  return c;
}

GpuCase topk(HostTensor x, int64_t k, int64_t axis, int64_t largest, int64_t sorted = 1) {
  GpuCase c = make("TopK", {input(std::move(x)), fixed(HostTensor::int64s({1}, {k}))},
                   NodeSpec().integer("axis", axis).integer("largest", largest).integer("sorted", sorted), 11);
  c.num_outputs = 2;
  c.atol = c.rtol = 0;  // the values are copies of input elements
  c.half_atol = c.half_rtol = 0;
  c.label = "k " + std::to_string(k) + " axis " + std::to_string(axis) + " largest " + std::to_string(largest);
  return c;
}

// ArgMax / ArgMin

TEST_F(GpuTest, ArgMaxArgMinEveryAxis) {
  std::mt19937 rng(101);
  const Dims x = {3, 7, 5, 9};
  for (const char* op : {"ArgMax", "ArgMin"})
    for (int64_t axis : {0, 1, 2, 3, -1, -3})
      for (int64_t keepdims : {1, 0})
        for (int64_t select_last : {0, 1}) run_both(arg(op, HostTensor::random(x, rng), axis, keepdims, select_last));
  // Rank 1 and rank 2 with the default attributes (axis 0, keepdims 1).
  run_both(make("ArgMax", {input(HostTensor::random({31}, rng))}));
  run_both(make("ArgMin", {input(HostTensor::random({13, 17}, rng))}));
  run_both(arg("ArgMax", HostTensor::random({1, 1, 5}, rng), 1, 0, 0));  // an axis of one element
}

TEST_F(GpuTest, ArgMaxArgMinTies) {
  std::mt19937 rng(102);
  for (const char* op : {"ArgMax", "ArgMin"})
    for (int64_t select_last : {0, 1}) {
      for (int64_t axis : {0, 1, -1}) run_both(arg(op, tied({5, 13, 11}, rng, 3), axis, 1, select_last));
      run_both(arg(op, tied({4, 300}, rng, 5), 1, 0, select_last));   // a warp per row
      run_both(arg(op, tied({3, 1000}, rng, 5), 1, 0, select_last));  // a block per row
      run_both(arg(op, tied({2, 33, 41, 57}, rng, 3), 1, 0, select_last));  // a thread per pixel
      run_both(arg(op, tied({600, 4}, rng, 3), 0, 0, select_last));  // few strided rows: a block each
    }
}

TEST_F(GpuTest, ArgMaxArgMinNaN) {
  std::mt19937 rng(103);
  // numpy: the first NaN wins, for ArgMin too and whatever select_last_index says.
  for (const char* op : {"ArgMax", "ArgMin"})
    for (int64_t select_last : {0, 1}) {
      run_both(arg(op, with_nans({3, 7, 40}, rng, 37, 5), -1, 1, select_last));
      run_both(arg(op, with_nans({3, 1000}, rng, 331, 100), 1, 1, select_last));
      run_both(arg(op, with_nans({300, 9}, rng, 29, 3), 0, 0, select_last));
      run_both(arg(op, with_nans({2, 21, 41, 53}, rng, 97, 11), 1, 1, select_last));
    }
}

// Each kernel: thread (short rows; many strided rows), warp and block (contiguous rows; few strided rows).
TEST_F(GpuTest, ArgMaxArgMinRowLengths) {
  std::mt19937 rng(104);
  struct Shape {
    Dims x;
    int64_t axis;
  };
  for (const Shape& s : {Shape{{50, 17}, 1}, Shape{{50, 32}, 1}, Shape{{37, 33}, 1}, Shape{{37, 200}, -1},
                         Shape{{9, 257}, 1}, Shape{{1, 1000}, 1}, Shape{{3, 1000}, -1}, Shape{{2, 5000}, 1},
                         Shape{{1, 21, 67, 75}, 1}, Shape{{2, 7, 45, 47}, 1}, Shape{{5, 300, 7}, 1},
                         Shape{{3000, 3}, 0}})
    for (const char* op : {"ArgMax", "ArgMin"}) run_both(arg(op, HostTensor::random(s.x, rng), s.axis, 1, 0));
}

TEST_F(GpuTest, ArgMaxArgMinChannelsLast) {
  std::mt19937 rng(105);
  // The kernel takes NHWC where the row-major int64 output has the channels-last bytes too:
  // over C (either keepdims), or keepdims 0 over any axis.
  struct Case {
    int64_t axis, keepdims;
  };
  for (const char* op : {"ArgMax", "ArgMin"})
    for (const Case& a : {Case{1, 1}, Case{1, 0}, Case{-3, 1}, Case{0, 0}, Case{2, 0}, Case{3, 0}})
      for (int64_t select_last : {0, 1}) {
        GpuCase c = arg(op, tied({2, 21, 7, 9}, rng, 5), a.axis, a.keepdims, select_last);
        c.nhwc = true;
        run_both(c);
        c = arg(op, HostTensor::random({1, 21, 45, 53}, rng), a.axis, a.keepdims, select_last);
        c.nhwc = true;
        run_both(c);
      }
}

// TopK

TEST_F(GpuTest, TopKEveryAxis) {
  std::mt19937 rng(106);
  const Dims x = {3, 7, 5, 9};
  for (int64_t axis : {0, 1, 2, 3, -1, -2})
    for (int64_t largest : {1, 0}) {
      const int64_t n = x[static_cast<size_t>(axis < 0 ? axis + 4 : axis)];
      for (int64_t k : {int64_t{1}, (n + 1) / 2, n}) run_both(topk(HostTensor::random(x, rng), k, axis, largest));
    }
  run_both(topk(HostTensor::random({31}, rng), 7, 0, 1, 0));  // sorted=0 may come back sorted
  run_both(topk(HostTensor::random({5, 6}, rng), 0, 1, 1));   // K = 0: empty outputs
  GpuCase legacy =
      make("TopK", {input(HostTensor::random({3, 7, 5}, rng))}, NodeSpec().integer("k", 3).integer("axis", 1), 1);
  legacy.num_outputs = 2;
  legacy.atol = legacy.rtol = legacy.half_atol = legacy.half_rtol = 0;
  run_both(legacy);
}

TEST_F(GpuTest, TopKTies) {
  std::mt19937 rng(107);
  for (int64_t largest : {1, 0}) {
    for (int64_t k : {1, 5, 37}) run_both(topk(tied({4, 37}, rng, 5), k, -1, largest));
    for (int64_t k : {1, 6}) run_both(topk(tied({37, 6}, rng, 3), k, 1, largest));
    run_both(topk(tied({5, 37, 3}, rng, 3), 20, 1, largest));
    for (int64_t k : {10, 100}) run_both(topk(tied({2, 1000}, rng, 7), k, 1, largest));
    run_both(topk(tied({2, 21, 41, 53}, rng, 3), 3, 1, largest));
    run_both(topk(tied({1, 9000}, rng, 9), 300, 1, largest));
    run_both(topk(tied({2, 5000}, rng, 9), 5000, 1, largest));
  }
}

TEST_F(GpuTest, TopKNaN) {
  std::mt19937 rng(108);
  // Smallest first puts NaN last, so K up to the row's numbers takes none of them (a NaN in the
  // expected values would fail the comparison, so largest=1 rows hold none).
  run_both(topk(with_nans({3, 40}, rng, 8, 5), 10, 1, 0));
  run_both(topk(with_nans({3, 40}, rng, 8, 5), 35, 1, 0));
  run_both(topk(with_nans({2, 1000}, rng, 10, 3), 16, 1, 0));
  run_both(topk(with_nans({2, 1000}, rng, 10, 3), 900, 1, 0));
  run_both(topk(with_nans({2, 21, 41, 53}, rng, 21, 4), 16, 1, 0));
  run_both(topk(with_nans({1, 9000}, rng, 10, 1), 1000, 1, 0));
  run_both(topk(with_nans({1, 5000}, rng, 10, 1), 4500, 1, 0));
}

// Each method: a thread per row (K up to 1, 4 and 16; short rows, or many strided ones), a block
// selection (K up to 16, rows up to 4096), a chunk sort (any K up to 4096 elements; strided
// rows), chunk passes over long rows, a row sort in the workspace (long rows, large K).
TEST_F(GpuTest, TopKRowLengths) {
  std::mt19937 rng(109);
  struct Case {
    Dims x;
    int64_t axis;
    std::vector<int64_t> ks;
  };
  const std::vector<Case> cases = {
      {{50, 40}, 1, {1, 3, 4, 5, 16}},
      {{2, 21, 37, 31}, 1, {1, 2, 5, 16, 21}},
      {{1, 100, 47, 45}, 1, {5, 17}},
      {{3, 40}, -1, {17, 40}},
      {{1, 1000}, 1, {1, 5, 100, 1000}},
      {{3, 1000}, -1, {10, 999}},
      {{9, 257}, -1, {16}},
      {{5, 300, 3}, 1, {7, 20, 300}},
      {{2, 4096}, 1, {16, 4096}},
      {{2, 9000}, 1, {1, 100, 2048}},
      {{1, 20000}, -1, {2000}},
      {{3, 5000, 2}, 1, {50}},
      {{2, 5000}, 1, {2049, 3000, 5000}},
      {{4500, 2}, 0, {4500}},
  };
  for (const Case& c : cases)
    for (int64_t k : c.ks)
      for (int64_t largest : {1, 0}) run_both(topk(HostTensor::random(c.x, rng), k, c.axis, largest));
}

}  // namespace
}  // namespace edgert::gpu_test

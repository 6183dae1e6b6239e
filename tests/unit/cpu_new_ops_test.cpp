// The CPU plugin's reference kernels for CausalConvWithState, LinearAttention, DeformConv,
// FlexAttention, antialiased Resize and the DFT, through the plugin's C ABI alone, checked
// against properties that pin down their meaning rather than against copies of their formulas:
// a stateful op run in pieces equals one run over the whole sequence, DeformConv without
// offsets is Conv, FlexAttention is Attention, the float FFT agrees with the double transform on
// lengths of every factorization, the inverse one-sided DFT inverts the forward one, and a
// hand-computed antialiased downsampling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu_plugin_abi.h"

namespace edgert::test {
namespace {

const edgert_plugin& plugin() { return cpu_plugin_in(EDGERT_TEST_PLUGIN_DIR); }

// One output of a run, as doubles.
struct Result {
  std::vector<int64_t> dims;
  std::vector<double> values;
};

size_t element_size(edgert_dtype dtype) { return dtype == EDGERT_DTYPE_FLOAT64 ? 8 : 4; }

// Prepares and executes `kernel` on `inputs` (float32 or float64) with `outputs` outputs.
std::vector<Result> run(const char* kernel, const NodeSpec& spec, const std::vector<Tensor>& inputs, int outputs) {
  const edgert_kernel& k = kernel_named(plugin(), kernel);
  const edgert_node node = spec.node();
  std::vector<edgert_tensor> views;
  for (const Tensor& t : inputs) views.push_back(t.view(true));
  std::vector<edgert_tensor> out(static_cast<size_t>(outputs));
  edgert_prepare_info info{};
  edgert_error error{};
  void* state = nullptr;
  if (k.prepare(&k, &node, 0, views.data(), out.data(), &state, &info, &error) != EDGERT_OK)
    throw std::runtime_error(std::string(kernel) + " prepare: " + error.message);
  std::vector<std::vector<uint8_t>> bytes(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t n = 1;
    for (int d = 0; d < out[i].rank; ++d) n *= out[i].dims[d];
    bytes[i].assign(static_cast<size_t>(n) * element_size(out[i].dtype), 0xA5);  // poison: all must be written
    out[i].data = bytes[i].data();
  }
  const size_t workspace_bytes = (info.workspace_bytes + 63) / 64 * 64;
  std::unique_ptr<void, decltype(&std::free)> workspace(workspace_bytes ? std::aligned_alloc(64, workspace_bytes) : nullptr,
                                                        &std::free);
  const edgert_status s = k.execute(&k, state, &node, views.data(), out.data(), workspace.get(), nullptr, &error);
  if (state) k.release(&k, state);
  if (s != EDGERT_OK) throw std::runtime_error(std::string(kernel) + " execute: " + error.message);
  std::vector<Result> results;
  for (size_t i = 0; i < out.size(); ++i) {
    Result r;
    r.dims.assign(out[i].dims, out[i].dims + out[i].rank);
    const size_t n = bytes[i].size() / element_size(out[i].dtype);
    for (size_t j = 0; j < n; ++j) {
      if (out[i].dtype == EDGERT_DTYPE_FLOAT64) {
        double v;
        std::memcpy(&v, bytes[i].data() + 8 * j, 8);
        r.values.push_back(v);
      } else {
        float v;
        std::memcpy(&v, bytes[i].data() + 4 * j, 4);
        r.values.push_back(v);
      }
    }
    results.push_back(std::move(r));
  }
  return results;
}

Tensor f32(std::vector<int64_t> dims, const std::vector<float>& v) { return Tensor::of(EDGERT_DTYPE_FLOAT32, std::move(dims), v); }
Tensor f64(std::vector<int64_t> dims, const std::vector<double>& v) { return Tensor::of(EDGERT_DTYPE_FLOAT64, std::move(dims), v); }
Tensor absent() { return Tensor{}; }

std::vector<float> random_floats(std::mt19937& rng, int64_t n, double lo = -1, double hi = 1) {
  return random_values<float>(rng, n, lo, hi);
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tolerance,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tolerance) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " values differ; first at " << first << ": "
                     << got[first] << " vs " << want[first];
}

// [batch, channels, length] sliced along time to [from, to).
std::vector<float> time_slice(const std::vector<float>& x, int64_t rows, int64_t length, int64_t from, int64_t to) {
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = from; t < to; ++t) out.push_back(x[static_cast<size_t>(r * length + t)]);
  return out;
}

std::vector<float> to_floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

TEST(CpuNewOps, CausalConvWithStateInPiecesEqualsOneRun) {
  std::mt19937 rng(7);
  const int64_t batch = 2, channels = 3, length = 11, k = 4;
  const std::vector<float> x = random_floats(rng, batch * channels * length);
  const std::vector<float> w = random_floats(rng, channels * k);
  const std::vector<float> bias = random_floats(rng, channels);
  NodeSpec spec("", "CausalConvWithState", 3, 2);
  spec.string("activation", "silu");
  const std::vector<Result> whole =
      run("ref-causal-conv-with-state", spec, {f32({batch, channels, length}, x), f32({channels, 1, k}, w), f32({channels}, bias)}, 2);
  ASSERT_EQ(whole[1].dims, (std::vector<int64_t>{batch, channels, k - 1}));

  // Pieces of 2 (shorter than the state), 1 and 8 tokens, each starting from the last one's state.
  NodeSpec with_state("", "CausalConvWithState", 4, 2);
  with_state.string("activation", "silu");
  std::vector<float> state(static_cast<size_t>(batch * channels * (k - 1)), 0.0f);
  std::vector<double> outputs(static_cast<size_t>(batch * channels * length));
  int64_t from = 0;
  for (int64_t piece : {2, 1, 8}) {
    const std::vector<Result> r =
        run("ref-causal-conv-with-state", with_state,
            {f32({batch, channels, piece}, time_slice(x, batch * channels, length, from, from + piece)),
             f32({channels, 1, k}, w), f32({channels}, bias), f32({batch, channels, k - 1}, state)},
            2);
    for (int64_t row = 0; row < batch * channels; ++row)
      for (int64_t t = 0; t < piece; ++t)
        outputs[static_cast<size_t>(row * length + from + t)] = r[0].values[static_cast<size_t>(row * piece + t)];
    state = to_floats(r[1].values);
    from += piece;
  }
  expect_near_all(outputs, whole[0].values, 0, "outputs");
  expect_near_all(std::vector<double>(state.begin(), state.end()), whole[1].values, 0, "final state");
}

TEST(CpuNewOps, LinearAttentionTokenByTokenEqualsPrefill) {
  std::mt19937 rng(11);
  const int64_t batch = 2, tokens = 5, q_heads = 4, kv_heads = 2, dk = 3, dv = 5;
  const std::vector<float> q = random_floats(rng, batch * tokens * q_heads * dk);
  const std::vector<float> k = random_floats(rng, batch * tokens * kv_heads * dk);
  const std::vector<float> v = random_floats(rng, batch * tokens * kv_heads * dv);
  const std::vector<float> decay = random_floats(rng, batch * tokens * kv_heads * dk, -0.3, 0);
  const std::vector<float> beta = random_floats(rng, batch * tokens * kv_heads, 0, 1);
  const std::vector<float> past = random_floats(rng, batch * kv_heads * dk * dv);
  NodeSpec spec("", "LinearAttention", 6, 2);
  spec.string("update_rule", "gated_delta").integer("q_num_heads", q_heads).integer("kv_num_heads", kv_heads);
  const std::vector<Result> whole =
      run("ref-linear-attention", spec,
          {f32({batch, tokens, q_heads * dk}, q), f32({batch, tokens, kv_heads * dk}, k), f32({batch, tokens, kv_heads * dv}, v),
           f32({batch, kv_heads, dk, dv}, past), f32({batch, tokens, kv_heads * dk}, decay), f32({batch, tokens, kv_heads}, beta)},
          2);

  // The token axis is 1 of [batch, tokens, width]: one token is a slice of `width` per batch.
  auto token = [&](const std::vector<float>& all, int64_t width, int64_t t) {
    std::vector<float> out;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < width; ++i) out.push_back(all[static_cast<size_t>((b * tokens + t) * width + i)]);
    return out;
  };
  std::vector<float> state = past;
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<Result> r =
        run("ref-linear-attention", spec,
            {f32({batch, 1, q_heads * dk}, token(q, q_heads * dk, t)), f32({batch, 1, kv_heads * dk}, token(k, kv_heads * dk, t)),
             f32({batch, 1, kv_heads * dv}, token(v, kv_heads * dv, t)), f32({batch, kv_heads, dk, dv}, state),
             f32({batch, 1, kv_heads * dk}, token(decay, kv_heads * dk, t)), f32({batch, 1, kv_heads}, token(beta, kv_heads, t))},
            2);
    std::vector<double> expected;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < q_heads * dv; ++i)
        expected.push_back(whole[0].values[static_cast<size_t>((b * tokens + t) * q_heads * dv + i)]);
    // Each step rounds the state to float; the prefill keeps it in double.
    expect_near_all(r[0].values, expected, 1e-5, "token " + std::to_string(t));
    state = to_floats(r[1].values);
  }
  expect_near_all(std::vector<double>(state.begin(), state.end()), whole[1].values, 1e-5, "final state");
}

TEST(CpuNewOps, DeformConvWithoutOffsetsIsConv) {
  std::mt19937 rng(3);
  const int64_t n = 2, c = 4, h = 7, w = 6, oc = 6, group = 2, kh = 3, kw = 2;
  NodeSpec conv("", "Conv", 3);
  conv.ints("pads", {1, 0, 2, 1}).ints("strides", {2, 1}).ints("dilations", {1, 2}).integer("group", group);
  NodeSpec deform("", "DeformConv", 5);
  deform.ints("pads", {1, 0, 2, 1}).ints("strides", {2, 1}).ints("dilations", {1, 2}).integer("group", group)
      .integer("offset_group", 2);
  const std::vector<float> x = random_floats(rng, n * c * h * w);
  const std::vector<float> weights = random_floats(rng, oc * (c / group) * kh * kw);
  const std::vector<float> bias = random_floats(rng, oc);
  const std::vector<Result> reference =
      run("ref-conv", conv, {f32({n, c, h, w}, x), f32({oc, c / group, kh, kw}, weights), f32({oc}, bias)}, 1);
  const int64_t oh = reference[0].dims[2], ow = reference[0].dims[3];
  const int64_t taps = kh * kw;
  const std::vector<float> zero_offsets(static_cast<size_t>(n * 2 * taps * 2 * oh * ow), 0.0f);
  const std::vector<float> ones(static_cast<size_t>(n * 2 * taps * oh * ow), 1.0f);
  const std::vector<Result> got =
      run("ref-deform-conv", deform,
          {f32({n, c, h, w}, x), f32({oc, c / group, kh, kw}, weights), f32({n, 2 * taps * 2, oh, ow}, zero_offsets),
           f32({oc}, bias), f32({n, 2 * taps, oh, ow}, ones)},
          1);
  EXPECT_EQ(got[0].dims, reference[0].dims);
  expect_near_all(got[0].values, reference[0].values, 1e-6, "DeformConv vs Conv");

  // An offset of exactly one pixel to the right is the same convolution of the input shifted left.
  std::vector<float> right(zero_offsets.size(), 0.0f), shifted(x.size(), 0.0f);
  for (size_t i = 0; i < right.size(); ++i)
    if ((i / static_cast<size_t>(oh * ow)) % 2 == 1) right[i] = 1.0f;
  for (int64_t row = 0; row < n * c * h; ++row)
    for (int64_t col = 0; col + 1 < w; ++col) shifted[static_cast<size_t>(row * w + col)] = x[static_cast<size_t>(row * w + col + 1)];
  const std::vector<Result> moved = run("ref-deform-conv", deform,
                                        {f32({n, c, h, w}, x), f32({oc, c / group, kh, kw}, weights),
                                         f32({n, 2 * taps * 2, oh, ow}, right), f32({oc}, bias), absent()},
                                        1);
  const std::vector<Result> of_shifted =
      run("ref-conv", conv, {f32({n, c, h, w}, shifted), f32({oc, c / group, kh, kw}, weights), f32({oc}, bias)}, 1);
  expect_near_all(moved[0].values, of_shifted[0].values, 1e-6, "offset one pixel right");
}

TEST(CpuNewOps, FlexAttentionIsAttention) {
  std::mt19937 rng(5);
  const int64_t b = 2, q_heads = 6, kv_heads = 3, l = 5, s = 7, e = 8, ev = 4;
  std::vector<double> q, k, v;
  for (float f : random_floats(rng, b * q_heads * l * e)) q.push_back(f);
  for (float f : random_floats(rng, b * kv_heads * s * e)) k.push_back(f);
  for (float f : random_floats(rng, b * kv_heads * s * ev)) v.push_back(f);
  const std::vector<Tensor> inputs = {f64({b, q_heads, l, e}, q), f64({b, kv_heads, s, e}, k), f64({b, kv_heads, s, ev}, v)};
  NodeSpec flex("ai.onnx.preview", "FlexAttention", 3);
  flex.real("scale", 0.25f);
  NodeSpec attention("", "Attention", 3);
  attention.real("scale", 0.25f);
  const std::vector<Result> got = run("ref-flex-attention", flex, inputs, 1);
  const std::vector<Result> want = run("ref-attention", attention, inputs, 1);
  EXPECT_EQ(got[0].dims, want[0].dims);
  expect_near_all(got[0].values, want[0].values, 1e-12, "FlexAttention vs Attention");
}

// A DFT of `length` along axis 1 of [2, length, 3, comps], forward or inverse.
std::vector<Result> dft(edgert_dtype dtype, const std::vector<double>& x, int64_t length, int64_t comps, bool inverse,
                        bool onesided = false, int64_t dft_length = 0) {
  NodeSpec spec("", "DFT", dft_length ? 2 : 1);
  spec.integer("axis", 1).integer("inverse", inverse ? 1 : 0).integer("onesided", onesided ? 1 : 0);
  std::vector<Tensor> inputs = {dtype == EDGERT_DTYPE_FLOAT64 ? f64({2, length, 3, comps}, x)
                                                               : f32({2, length, 3, comps}, to_floats(x))};
  if (dft_length) inputs.push_back(Tensor::of<int64_t>(EDGERT_DTYPE_INT64, {}, {dft_length}, true));
  return run("ref-dft", spec, inputs, 1);
}

TEST(CpuNewOps, FloatDftAgreesWithTheDoubleTransform) {
  std::mt19937 rng(13);
  // Lengths of small and large prime factors, alone and mixed.
  for (int64_t length : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 20, 24, 30, 32, 36, 49, 60, 64, 77, 97, 100, 120}) {
    std::vector<double> x;
    for (float f : random_floats(rng, 2 * length * 3 * 2)) x.push_back(f);  // float values: both see the same input
    for (bool inverse : {false, true}) {
      const std::vector<Result> got = dft(EDGERT_DTYPE_FLOAT32, x, length, 2, inverse);
      const std::vector<Result> want = dft(EDGERT_DTYPE_FLOAT64, x, length, 2, inverse);
      // Float32 output rounding, with room for a length-dependent sum; inputs are in [-1, 1).
      const double bound = inverse ? 1.0 : static_cast<double>(length);
      expect_near_all(got[0].values, want[0].values, 4e-7 * bound * (1 + std::log2(static_cast<double>(length))),
                      "length " + std::to_string(length) + (inverse ? " inverse" : " forward"));
    }
  }
}

TEST(CpuNewOps, InverseOnesidedDftInvertsTheOnesidedForward) {
  std::mt19937 rng(17);
  for (int64_t length : {1, 2, 5, 8, 9, 12}) {
    std::vector<double> x;
    for (float f : random_floats(rng, 2 * length * 3)) x.push_back(f);
    const std::vector<Result> spectrum = dft(EDGERT_DTYPE_FLOAT64, x, length, 1, false, true);
    const int64_t bins = length / 2 + 1;
    ASSERT_EQ(spectrum[0].dims, (std::vector<int64_t>{2, bins, 3, 2}));
    NodeSpec spec("", "DFT", 2);
    spec.integer("axis", 1).integer("inverse", 1).integer("onesided", 1);
    const std::vector<Result> back =
        run("ref-dft", spec,
            {f64({2, bins, 3, 2}, spectrum[0].values), Tensor::of<int64_t>(EDGERT_DTYPE_INT64, {}, {length}, true)}, 1);
    EXPECT_EQ(back[0].dims, (std::vector<int64_t>{2, length, 3, 1}));
    expect_near_all(back[0].values, x, 1e-12, "length " + std::to_string(length));
  }
}

std::vector<Result> resize(const std::vector<float>& x, std::vector<int64_t> dims, const std::vector<float>& scales,
                           const char* mode, int antialias) {
  NodeSpec spec("", "Resize", 3);
  spec.string("mode", mode).integer("antialias", antialias);
  return run("ref-resize", spec,
             {f32(dims, x), absent(), Tensor::of<float>(EDGERT_DTYPE_FLOAT32, {static_cast<int64_t>(scales.size())}, scales, true)},
             1);
}

TEST(CpuNewOps, AntialiasedResizeAveragesWhatEachOutputCovers) {
  // Halving 0..7 with the linear filter stretched to 4 taps of weights 1/8, 3/8, 3/8, 1/8 (half
  // pixel coordinates, the edge repeated).
  const std::vector<Result> half = resize({0, 1, 2, 3, 4, 5, 6, 7}, {1, 1, 1, 8}, {1, 1, 1, 0.5f}, "linear", 1);
  expect_near_all(half[0].values, {0.625, 2.5, 4.5, 6.375}, 1e-6, "linear halving");

  // Upsampling is untouched by antialias, for both filters.
  std::mt19937 rng(19);
  const std::vector<float> x = random_floats(rng, 2 * 5 * 6);
  for (const char* mode : {"linear", "cubic"}) {
    const std::vector<Result> plain = resize(x, {1, 2, 5, 6}, {1, 1, 1.5f, 2.25f}, mode, 0);
    const std::vector<Result> antialiased = resize(x, {1, 2, 5, 6}, {1, 1, 1.5f, 2.25f}, mode, 1);
    expect_near_all(antialiased[0].values, plain[0].values, 1e-6, std::string(mode) + " upsampling");
  }

  // A constant stays constant whatever the filter's width.
  const std::vector<Result> flat = resize(std::vector<float>(4 * 9, 3.0f), {1, 1, 4, 9}, {1, 1, 0.5f, 0.3f}, "cubic", 1);
  expect_near_all(flat[0].values, std::vector<double>(flat[0].values.size(), 3.0), 1e-6, "constant");
}

}  // namespace
}  // namespace edgert::test

// The CPU plugin's quantized GEMM, built from its source: the packing against its source, the
// scalar reference against the formula of qgemm.h computed here from the unpacked weights, and
// the AVX-512 VNNI tile against the reference bit for bit, on random inputs of awkward sizes
// (M, N, K off the tile sizes, K not a multiple of 4, K = 1, large K), zero points 0, 128 and
// others, every output kind, saturation at both ends of u8 and ReLU folded into the clamp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gemm/qgemm.h"

namespace edgert::cpu::gemm {
namespace {

struct Problem {
  int64_t m = 0, n = 0, k = 0, lda = 0;
  std::vector<uint8_t> a;   // m x lda, the bytes past k random too
  std::vector<int8_t> w;    // n x k
  std::vector<int32_t> bias;
  std::vector<float> scale;
  PackedQWeights packed;
};

Problem random_problem(std::mt19937& rng, int64_t m, int64_t n, int64_t k, int64_t row_padding = 0) {
  Problem p;
  p.m = m, p.n = n, p.k = k, p.lda = k + row_padding;
  std::uniform_int_distribution<int> byte(0, 255), weight(-128, 127), bias(-20000, 20000);
  std::uniform_real_distribution<float> scale(0.5f, 2.0f);
  p.a.resize(static_cast<size_t>(m * p.lda));
  for (auto& v : p.a) v = static_cast<uint8_t>(byte(rng));
  p.w.resize(static_cast<size_t>(n * k));
  for (auto& v : p.w) v = static_cast<int8_t>(weight(rng));
  for (int64_t j = 0; j < n; ++j) {
    p.bias.push_back(bias(rng));
    // Scales that map the typical accumulator (about 128 * 64 * sqrt(k)) over a few hundred
    // output steps, so u8 results land inside the range and on both of its ends.
    p.scale.push_back(scale(rng) * 64.0f / (128.0f * 64.0f * std::sqrt(static_cast<float>(std::max<int64_t>(k, 1)))));
  }
  EXPECT_TRUE(pack_qweights(p.w.data(), n, k, k, 1, p.packed));
  return p;
}

QActivations activations(const Problem& p, int32_t zero_point) { return {p.a.data(), p.lda, zero_point}; }

// sum_p (A(i, p) - za) W(j, p) + bias[j] from the unpacked weights, in int64.
int64_t exact_sum(const Problem& p, int32_t za, bool with_bias, int64_t i, int64_t j) {
  int64_t sum = with_bias ? p.bias[static_cast<size_t>(j)] : 0;
  for (int64_t q = 0; q < p.k; ++q)
    sum += (static_cast<int64_t>(p.a[static_cast<size_t>(i * p.lda + q)]) - za) * p.w[static_cast<size_t>(j * p.k + q)];
  return sum;
}

struct Outputs {
  std::vector<int32_t> s32;
  std::vector<float> f32;
  std::vector<uint8_t> u8;
};

// Runs `isa` with each output kind; the u8 output with the given zero point and clamp.
Outputs run(QgemmIsa isa, const Problem& p, int32_t za, bool with_bias, int32_t y_zero_point, int32_t q_min,
            float f_min, int threads = 1) {
  Outputs o;
  o.s32.assign(static_cast<size_t>(p.m * p.n), 0x5a5a5a5a);
  o.f32.assign(static_cast<size_t>(p.m * p.n), -1.0f);
  o.u8.assign(static_cast<size_t>(p.m * p.n), 0x5a);
  QOutput y;
  y.bias = with_bias ? p.bias.data() : nullptr;
  y.row_stride = p.n;
  y.kind = QOutput::Kind::Int32;
  y.data = o.s32.data();
  qgemm(isa, p.packed, activations(p, za), p.m, y, threads);
  y.kind = QOutput::Kind::Float32;
  y.data = o.f32.data();
  y.scale = p.scale.data();
  y.f_min = f_min;
  qgemm(isa, p.packed, activations(p, za), p.m, y, threads);
  y.kind = QOutput::Kind::Uint8;
  y.data = o.u8.data();
  y.zero_point = y_zero_point;
  y.q_min = q_min;
  qgemm(isa, p.packed, activations(p, za), p.m, y, threads);
  return o;
}

void expect_same_bits(const Outputs& want, const Outputs& got, const char* what) {
  ASSERT_EQ(want.s32, got.s32) << what << ": int32 output";
  ASSERT_EQ(0, std::memcmp(want.f32.data(), got.f32.data(), want.f32.size() * sizeof(float))) << what << ": float output";
  ASSERT_EQ(want.u8, got.u8) << what << ": u8 output";
}

struct Shape {
  int64_t m, n, k;
};
// Off every tile size, plus whole tiles, K = 1 to 3, K % 4 of each value, a large K, and the
// 1x1 convolutions of mobilenet's last stage.
const Shape kShapes[] = {{1, 1, 1},   {1, 1, 2},    {2, 3, 3},     {12, 32, 4},   {13, 33, 5},  {11, 31, 6},
                         {25, 17, 7}, {24, 16, 8},  {5, 64, 1},    {37, 48, 9},   {7, 47, 130}, {100, 96, 63},
                         {49, 1280, 320}, {3, 5, 4099}, {2, 33, 20001}, {130, 65, 64}, {97, 257, 27}};

TEST(QgemmTest, PackingHoldsTheWeightsAndTheirSums) {
  std::mt19937 rng(1);
  for (const Shape& s : kShapes) {
    Problem p = random_problem(rng, 1, s.n, s.k);
    // The same weights stored [K, N]: the same packing.
    std::vector<int8_t> transposed(static_cast<size_t>(s.n * s.k));
    for (int64_t j = 0; j < s.n; ++j)
      for (int64_t q = 0; q < s.k; ++q) transposed[static_cast<size_t>(q * s.n + j)] = p.w[static_cast<size_t>(j * s.k + q)];
    PackedQWeights from_kn;
    ASSERT_TRUE(pack_qweights(transposed.data(), s.n, s.k, 1, s.n, from_kn));
    EXPECT_EQ(p.packed.data, from_kn.data);
    EXPECT_EQ(p.packed.column_sums, from_kn.column_sums);
    for (int64_t j = 0; j < s.n; ++j) {
      int32_t sum = 0;
      for (int64_t q = 0; q < s.k; ++q) {
        ASSERT_EQ(p.w[static_cast<size_t>(j * s.k + q)], p.packed.at(j, q)) << "j " << j << " p " << q;
        sum += p.w[static_cast<size_t>(j * s.k + q)];
      }
      ASSERT_EQ(sum, p.packed.column_sums[static_cast<size_t>(j)]);
    }
    // Padding channels and depths are zero: the tiles multiply them.
    for (size_t j = static_cast<size_t>(s.n); j < p.packed.column_sums.size(); ++j) ASSERT_EQ(0, p.packed.column_sums[j]);
    const int64_t padded_n = static_cast<int64_t>(p.packed.column_sums.size());
    for (int64_t j = 0; j < padded_n; ++j)
      for (int64_t q = 0; q < p.packed.groups() * 4; ++q) {
        if (j >= s.n || q >= s.k) {
          ASSERT_EQ(0, p.packed.at(j, q));
        }
      }
  }
}

TEST(QgemmTest, DepthBeyondTheInt32BoundIsRefused) {
  std::vector<int8_t> w(kQgemmMaxDepth + 1, 1);
  PackedQWeights packed;
  EXPECT_TRUE(pack_qweights(w.data(), 1, kQgemmMaxDepth, kQgemmMaxDepth, 1, packed));
  EXPECT_FALSE(pack_qweights(w.data(), 1, kQgemmMaxDepth + 1, kQgemmMaxDepth + 1, 1, packed));
  EXPECT_TRUE(packed.data.empty());
}

// The reference against qgemm.h's formulas evaluated here, independently of the packing.
TEST(QgemmTest, ReferenceFollowsTheFormulas) {
  std::mt19937 rng(2);
  for (const Shape& s : {Shape{13, 33, 5}, Shape{7, 47, 130}, Shape{3, 5, 4099}}) {
    for (int32_t za : {0, 128, 37}) {
      Problem p = random_problem(rng, s.m, s.n, s.k, 3);
      const int32_t y_zp = 120, q_min = 0;
      const Outputs o = run(QgemmIsa::Reference, p, za, true, y_zp, q_min, -INFINITY);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          const size_t at = static_cast<size_t>(i * s.n + j);
          const int64_t sum = exact_sum(p, za, true, i, j);
          ASSERT_EQ(sum, o.s32[at]);
          const float f = static_cast<float>(sum) * p.scale[static_cast<size_t>(j)];
          ASSERT_EQ(f, o.f32[at]);
          const long q = std::clamp<long>(std::lrint(f) + y_zp, q_min, 255);
          ASSERT_EQ(q, o.u8[at]) << "i " << i << " j " << j << " f " << f;
        }
      }
    }
  }
}

TEST(QgemmTest, VnniTileMatchesTheReference) {
  if (!qgemm_isa_available(QgemmIsa::Avx512Vnni)) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  std::mt19937 rng(3);
  int u8_low = 0, u8_high = 0, u8_inside = 0;
  for (const Shape& s : kShapes) {
    for (int32_t za : {0, 128, 255, 3}) {
      for (bool with_bias : {false, true}) {
        Problem p = random_problem(rng, s.m, s.n, s.k, za == 3 ? 5 : 0);
        // ReLU (q_min = the output zero point, f_min = 0) on every other case.
        const bool relu = (za + with_bias) % 2 == 1;
        const int32_t y_zp = za == 255 ? 0 : za == 0 ? 255 : 128;
        const Outputs want = run(QgemmIsa::Reference, p, za, with_bias, y_zp, relu ? y_zp : 0, relu ? 0.0f : -INFINITY);
        const Outputs got = run(QgemmIsa::Avx512Vnni, p, za, with_bias, y_zp, relu ? y_zp : 0, relu ? 0.0f : -INFINITY);
        SCOPED_TRACE(testing::Message() << "m " << s.m << " n " << s.n << " k " << s.k << " za " << za << " bias "
                                        << with_bias << " relu " << relu);
        expect_same_bits(want, got, "vnni");
        for (uint8_t v : want.u8) (v == 0 ? u8_low : v == 255 ? u8_high : u8_inside)++;
      }
    }
  }
  // The cases reach both saturation ends and the values between.
  EXPECT_GT(u8_low, 1000);
  EXPECT_GT(u8_high, 1000);
  EXPECT_GT(u8_inside, 1000);
}

// Accumulators far outside u8 at either end, and ReLU's bound above 0: saturation in the
// epilogue, not only at the narrowing store.
TEST(QgemmTest, VnniSaturatesLikeTheReference) {
  if (!qgemm_isa_available(QgemmIsa::Avx512Vnni)) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  std::mt19937 rng(4);
  Problem p = random_problem(rng, 29, 70, 300);
  for (float& s : p.scale) s *= 1000.0f;
  for (int32_t y_zp : {0, 10, 128, 250, 255}) {
    for (int32_t q_min : {0, y_zp}) {
      const Outputs want = run(QgemmIsa::Reference, p, 128, true, y_zp, q_min, q_min ? 0.0f : -INFINITY);
      const Outputs got = run(QgemmIsa::Avx512Vnni, p, 128, true, y_zp, q_min, q_min ? 0.0f : -INFINITY);
      SCOPED_TRACE(testing::Message() << "y zero point " << y_zp << " q_min " << q_min);
      expect_same_bits(want, got, "vnni saturating");
      EXPECT_EQ(q_min, *std::min_element(want.u8.begin(), want.u8.end()));
      EXPECT_EQ(255, *std::max_element(want.u8.begin(), want.u8.end()));
    }
  }
}

// Outputs inside a wider matrix (row stride > n): nothing written past each row's n channels.
TEST(QgemmTest, VnniWritesOnlyItsColumns) {
  if (!qgemm_isa_available(QgemmIsa::Avx512Vnni)) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  std::mt19937 rng(5);
  Problem p = random_problem(rng, 14, 19, 10);
  const int64_t stride = 40;
  std::vector<int32_t> want(static_cast<size_t>(p.m * stride), 7), got(want);
  QOutput y;
  y.row_stride = stride;
  y.data = want.data();
  qgemm(QgemmIsa::Reference, p.packed, activations(p, 9), p.m, y, 1);
  y.data = got.data();
  qgemm(QgemmIsa::Avx512Vnni, p.packed, activations(p, 9), p.m, y, 1);
  EXPECT_EQ(want, got);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = p.n; j < stride; ++j) ASSERT_EQ(7, got[static_cast<size_t>(i * stride + j)]);
}

// Split over the pool (row blocks, or weight panels when rows are few): the same bits.
TEST(QgemmTest, ThreadsChangeNothing) {
  std::mt19937 rng(6);
  for (const Shape& s : {Shape{49, 1280, 64}, Shape{300, 40, 33}}) {
    Problem p = random_problem(rng, s.m, s.n, s.k);
    const QgemmIsa isa = qgemm_best_isa();
    expect_same_bits(run(isa, p, 128, true, 128, 0, -INFINITY, 1), run(isa, p, 128, true, 128, 0, -INFINITY, 4),
                     "threads");
  }
}

}  // namespace
}  // namespace edgert::cpu::gemm

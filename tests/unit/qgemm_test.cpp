// The CPU plugin's quantized GEMM (NCHW form), built from its source: the packing against its
// source, and every kernel family this CPU runs (the scalar reference always; the AVX-512 VNNI
// and AVX2 tiles, or the NEON and dot product tiles, where the CPU has them) against the formula
// of qgemm.h computed here from the unpacked weights, bit for bit. Random inputs of awkward
// sizes (rows and pixels off the tile sizes, K not a multiple of 4, K = 1, large K), zero points
// 0, 128 and others, image rows and im2col sources, results saturating at both ends of u8, 1 and
// 2 threads; and sums at the extremes of u8 x s8, where a kernel saturating in 16 bits differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gemm/qgemm.h"
#include "thread_pool.h"

namespace edgert::cpu::gemm {
namespace {

constexpr QgemmIsa kEveryFamily[] = {QgemmIsa::Reference, QgemmIsa::Avx512Vnni, QgemmIsa::Avx2, QgemmIsa::Neon,
                                     QgemmIsa::NeonDot};

std::vector<QgemmIsa> families_here() {
  std::vector<QgemmIsa> out;
  for (QgemmIsa isa : kEveryFamily)
    if (qgemm_isa_available(isa)) out.push_back(isa);
  return out;
}

const char* name_of(QgemmIsa isa) {
  switch (isa) {
    case QgemmIsa::Reference: return "reference";
    case QgemmIsa::Avx512Vnni: return "avx512vnni";
    case QgemmIsa::Avx2: return "avx2";
    case QgemmIsa::Neon: return "neon";
    case QgemmIsa::NeonDot: return "dotprod";
  }
  return "?";
}

struct Problem {
  int64_t m = 0, k = 0, pixels = 0;
  QPixels b;
  std::vector<uint8_t> image;
  std::vector<int8_t> w;  // m x k
  std::vector<int32_t> bias;
  std::vector<float> multiplier;
  PackedQRows packed;
};

// An image of `channels` planes of in_h x in_w read as B: its rows (1x1), or an im2col window.
Problem random_problem(std::mt19937& rng, int64_t m, int64_t channels, int64_t in_h, int64_t in_w, int64_t kernel,
                       int64_t stride, int64_t pad, int32_t zero_point) {
  Problem p;
  p.m = m;
  p.k = channels * kernel * kernel;
  std::uniform_int_distribution<int> byte(0, 255), weight(-128, 127), bias(-20000, 20000);
  std::uniform_real_distribution<float> scale(0.5f, 2.0f);
  p.image.resize(static_cast<size_t>(channels * in_h * in_w));
  for (auto& v : p.image) v = static_cast<uint8_t>(byte(rng));
  p.b.data = p.image.data();
  p.b.zero_point = zero_point;
  if (kernel == 1 && stride == 1 && pad == 0) {
    p.b.kind = QPixels::Kind::Rows;
    p.b.row_stride = in_h * in_w;
    p.pixels = in_h * in_w;
  } else {
    p.b.kind = QPixels::Kind::Im2col;
    const int64_t out_h = (in_h + 2 * pad - kernel) / stride + 1, out_w = (in_w + 2 * pad - kernel) / stride + 1;
    p.b.in_h = in_h, p.b.in_w = in_w, p.b.out_w = out_w, p.b.kernel_h = kernel, p.b.kernel_w = kernel;
    p.b.stride_h = stride, p.b.stride_w = stride, p.b.pad_top = pad, p.b.pad_left = pad;
    p.pixels = out_h * out_w;
  }
  p.w.resize(static_cast<size_t>(m * p.k));
  for (auto& v : p.w) v = static_cast<int8_t>(weight(rng));
  for (int64_t r = 0; r < m; ++r) {
    p.bias.push_back(bias(rng));
    // About 60 output steps per standard deviation of the sums: both ends of u8 are reached.
    p.multiplier.push_back(scale(rng) * 60.0f / (74.0f * 74.0f * std::sqrt(static_cast<float>(p.k))));
  }
  EXPECT_TRUE(pack_qrows(p.w.data(), m, p.k, p.packed));
  return p;
}

// The formula of qgemm.h from the unpacked weights.
std::vector<uint8_t> expected(const Problem& p, bool with_bias) {
  std::vector<uint8_t> y(static_cast<size_t>(p.m * p.pixels));
  for (int64_t r = 0; r < p.m; ++r)
    for (int64_t q = 0; q < p.pixels; ++q) {
      int64_t sum = with_bias ? p.bias[static_cast<size_t>(r)] : 0;
      for (int64_t k = 0; k < p.k; ++k)
        sum += (static_cast<int64_t>(p.b.at(k, q)) - p.b.zero_point) * p.w[static_cast<size_t>(r * p.k + k)];
      const float v =
          std::nearbyint(static_cast<float>(static_cast<int32_t>(sum)) * p.multiplier[static_cast<size_t>(r)]);
      y[static_cast<size_t>(r * p.pixels + q)] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, v + 77.0f)));
    }
  return y;
}

std::vector<uint8_t> run(QgemmIsa isa, const Problem& p, bool with_bias, int threads) {
  std::vector<uint8_t> y(static_cast<size_t>(p.m * p.pixels), 0x5a);
  QRequant out;
  out.data = y.data();
  out.row_stride = p.pixels;
  out.bias = with_bias ? p.bias.data() : nullptr;
  out.multiplier = p.multiplier.data();
  out.zero_point = 77;
  std::vector<int32_t> row_bias(static_cast<size_t>(p.m));
  const size_t bytes = qgemm_workspace_bytes(p.k, threads);
  std::unique_ptr<void, decltype(&std::free)> workspace(std::aligned_alloc(64, (bytes + 63) / 64 * 64), &std::free);
  qgemm(isa, p.packed, p.b, p.pixels, out, row_bias.data(), workspace.get(), threads);
  return y;
}

TEST(Qgemm, PackingKeepsEveryWeightAndItsRowSum) {
  std::mt19937 rng(1);
  const Problem p = random_problem(rng, 13, 7, 3, 3, 1, 1, 0, 0);
  for (int64_t r = 0; r < p.m; ++r) {
    int32_t sum = 0;
    for (int64_t k = 0; k < p.k; ++k) {
      EXPECT_EQ(p.packed.at(r, k), p.w[static_cast<size_t>(r * p.k + k)]);
      sum += p.w[static_cast<size_t>(r * p.k + k)];
    }
    EXPECT_EQ(p.packed.sums()[r], sum);
  }
  PackedQRows too_deep;
  EXPECT_FALSE(pack_qrows(p.w.data(), 1, kQgemmMaxDepth + 1, too_deep));
}

TEST(Qgemm, EveryFamilyHereMatchesTheFormulaBitForBit) {
  ThreadPool::instance().configure(2, false);
  struct Case {
    int64_t m, channels, in_h, in_w, kernel, stride, pad;
    int32_t zero_point;
  };
  const Case cases[] = {
      {1, 1, 1, 1, 1, 1, 0, 0},        {5, 3, 7, 7, 1, 1, 0, 128},     {13, 17, 13, 11, 1, 1, 0, 7},
      {24, 64, 5, 7, 1, 1, 0, 255},    {37, 33, 6, 6, 1, 1, 0, 100},   {12, 1000, 4, 9, 1, 1, 0, 128},
      {16, 3, 23, 19, 3, 2, 1, 128},   {9, 5, 9, 75, 3, 2, 1, 60},     {25, 6, 11, 13, 3, 1, 1, 3},
      {7, 3, 20, 41, 7, 2, 3, 128},    {30, 2, 8, 131, 3, 3, 0, 200},  {11, 4, 12, 35, 5, 2, 2, 31},
  };
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    const Problem p = random_problem(rng, c.m, c.channels, c.in_h, c.in_w, c.kernel, c.stride, c.pad, c.zero_point);
    for (bool with_bias : {true, false}) {
      const std::vector<uint8_t> want = expected(p, with_bias);
      for (QgemmIsa isa : families_here())
        for (int threads : {1, 2}) {
          const std::vector<uint8_t> got = run(isa, p, with_bias, threads);
          size_t bad = 0;
          for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
          EXPECT_EQ(bad, 0u) << name_of(isa) << " m " << c.m << " k " << p.k << " pixels " << p.pixels << " zb "
                             << c.zero_point << (with_bias ? " bias" : "") << ", " << threads << " thread(s)";
        }
    }
  }
}

// The families this CPU lacks say so (qgemm must never be handed one), and those of the host
// architecture's baseline are always there.
TEST(Qgemm, ReportsWhichFamiliesThisCpuRuns) {
  for (QgemmIsa isa : kEveryFamily)
    std::printf("qgemm family %-10s %s\n", name_of(isa), qgemm_isa_available(isa) ? "runs here" : "unavailable here");
  EXPECT_TRUE(qgemm_isa_available(QgemmIsa::Reference));
#if defined(__aarch64__)
  EXPECT_TRUE(qgemm_isa_available(QgemmIsa::Neon));
  EXPECT_FALSE(qgemm_isa_available(QgemmIsa::Avx2));
  EXPECT_FALSE(qgemm_isa_available(QgemmIsa::Avx512Vnni));
#elif defined(__x86_64__)
  EXPECT_FALSE(qgemm_isa_available(QgemmIsa::Neon));
  EXPECT_FALSE(qgemm_isa_available(QgemmIsa::NeonDot));
#endif
}

// Sums at the ends of the range: every activation 255 or 0 with zero point 0 or 255, every
// weight -128 or 127 (a pair of products past int16, where a saturating kernel would differ),
// and K large enough to carry the sums far past 16 bits.
TEST(Qgemm, EveryFamilyHereIsExactAtTheExtremes) {
  ThreadPool::instance().configure(1, false);
  for (int32_t zero_point : {0, 255, 128})
    for (int fill : {0, 1, 2}) {
      std::mt19937 rng(static_cast<unsigned>(zero_point * 3 + fill));
      Problem p = random_problem(rng, 14, 300, 5, 7, 1, 1, 0, zero_point);
      for (size_t i = 0; i < p.image.size(); ++i)
        p.image[i] = fill == 0 ? 255 : fill == 1 ? 0 : (i % 3 ? 255 : 0);
      for (size_t i = 0; i < p.w.size(); ++i) p.w[i] = fill == 2 ? (i % 2 ? 127 : -128) : (i % 5 ? -128 : 127);
      ASSERT_TRUE(pack_qrows(p.w.data(), p.m, p.k, p.packed));
      // Bias cancelling pixel 0's sum, multiplier 1: an error of one in any sum shows where the
      // pixels are alike.
      for (int64_t r = 0; r < p.m; ++r) {
        int64_t sum = 0;
        for (int64_t k = 0; k < p.k; ++k)
          sum += (static_cast<int64_t>(p.b.at(k, 0)) - zero_point) * p.w[static_cast<size_t>(r * p.k + k)];
        p.bias[static_cast<size_t>(r)] = static_cast<int32_t>(-sum);
        p.multiplier[static_cast<size_t>(r)] = 1.0f;
      }
      const std::vector<uint8_t> want = expected(p, true);
      for (QgemmIsa isa : families_here()) {
        const std::vector<uint8_t> got = run(isa, p, true, 1);
        size_t bad = 0;
        for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
        EXPECT_EQ(bad, 0u) << name_of(isa) << " zb " << zero_point << " fill " << fill;
      }
    }
}

}  // namespace
}  // namespace edgert::cpu::gemm

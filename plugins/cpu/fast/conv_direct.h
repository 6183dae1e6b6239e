// Direct convolution of few input channels (CNN stems), tactic f32-conv-direct-8x16-avx512:
// see x86/conv_direct_avx512.cpp. The shapes it takes, the weight packing and the workspace.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "activation.h"

namespace edgert::cpu {

constexpr int64_t kDirectConvMaxChannels = 8;

struct DirectConvShape {
  int64_t batch = 1, channels = 0, out_channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel = 3, stride = 1, pad_top = 0, pad_left = 0;
};

// Square 3x3, 5x5 or 7x7 windows, stride 1 or 2 both ways, no dilation, group 1, at most
// kDirectConvMaxChannels input channels.
inline bool direct_conv_applies(int64_t channels, int64_t group, int64_t kernel_h, int64_t kernel_w,
                                int64_t stride_h, int64_t stride_w, int64_t dilation_h, int64_t dilation_w) {
  return group == 1 && channels >= 1 && channels <= kDirectConvMaxChannels && kernel_h == kernel_w &&
         (kernel_h == 3 || kernel_h == 5 || kernel_h == 7) && stride_h == stride_w &&
         (stride_h == 1 || stride_h == 2) && dilation_h == 1 && dilation_w == 1;
}

// The input, zero-padded and split into its `stride` column phases, which the tactic builds
// for the rows each task (or band) reads, in that thread's workspace, right before using them:
// per input channel, the padded rows those output rows read, each row `stride` arrays of
// direct_conv_phase_width floats; array ph of a row holds its padded columns ph, ph + stride,
// ph + 2 stride, ... Every tap of 16 output columns is then one plain load (stride 2 gathered
// taps from two loads and a permute, with masks at the edges: a sixth of a stem's time, redone
// for every row block). Split a task's rows at a time, they stay in the core's cache between
// the split and the products (split whole first, the phase image went out to memory and back:
// 2-4% of mobilenet_v3_small, shufflenet and squeezenet).
inline int64_t direct_conv_phase_width(const DirectConvShape& s) {
  return ((s.out_w + 15) / 16 * 16 + (s.kernel - 1) / s.stride + 15) / 16 * 16;
}
// Padded input rows that `out_rows` consecutive output rows read.
inline int64_t direct_conv_phase_rows(const DirectConvShape& s, int64_t out_rows) {
  return (out_rows - 1) * s.stride + s.kernel;
}
// One thread's phase rows for `out_rows` output rows, in floats (a 64-byte multiple).
inline int64_t direct_conv_phase_floats(const DirectConvShape& s, int64_t out_rows) {
  return (s.channels * direct_conv_phase_rows(s, out_rows) * s.stride * direct_conv_phase_width(s) + 15) / 16 * 16;
}
// Output rows of the unpooled tactic's largest task (4 tasks a thread, consecutive rows each).
inline int64_t direct_conv_task_rows(const DirectConvShape& s, int threads) {
  const int64_t tasks = std::min<int64_t>(s.out_h, 4 * static_cast<int64_t>(std::max(threads, 1)));
  return (s.out_h + tasks - 1) / tasks;
}
inline size_t direct_conv_workspace_bytes(const DirectConvShape& s, int threads) {
  return static_cast<size_t>(std::max(threads, 1)) *
         static_cast<size_t>(direct_conv_phase_floats(s, direct_conv_task_rows(s, threads))) * sizeof(float);
}

// W [M, C, K, K] as blocks of 8 output channels: [M / 8][C K K][8], zeros past M.
inline std::vector<float> pack_direct_conv_weights(const float* w, int64_t out_channels, int64_t taps) {
  const int64_t blocks = (out_channels + 7) / 8;
  std::vector<float> packed(static_cast<size_t>(blocks * taps * 8), 0.0f);
  for (int64_t m = 0; m < out_channels; ++m)
    for (int64_t t = 0; t < taps; ++t)
      packed[static_cast<size_t>(((m / 8) * taps + t) * 8 + m % 8)] = w[m * taps + t];
  return packed;
}

// A max pool after the convolution (edgert.FusedConv's pool_* attributes): a square window of
// 2, 3 or 5, stride 1 or 2 (x86/max_pool_avx512.cpp's shapes), over the convolution's output.
// band_rows pooled rows are made at a time from a band of the convolution's rows held in a
// per-thread buffer, so the convolution's output is never written out whole.
struct DirectConvPool {
  int64_t kernel = 3, stride = 2, pad_top = 0, pad_left = 0, out_h = 0, out_w = 0;
  int64_t band_rows = 1;
};

// Convolution rows a band reads at most.
inline int64_t direct_conv_pool_band_conv_rows(const DirectConvPool& p) { return (p.band_rows - 1) * p.stride + p.kernel; }

// Output rows x86/max_pool_avx512.cpp makes together.
constexpr int64_t kPoolRowGroup = 7;

// Pooled rows per band: the band buffer within kBandBytes (in L2 with the input rows it reads),
// and at least four bands a thread where the image is tall enough (threads finish together).
inline int64_t direct_conv_pool_band_rows(const DirectConvShape& s, const DirectConvPool& p, int threads) {
  constexpr int64_t kBandBytes = 512 << 10;
  const int64_t row_bytes = s.out_channels * s.out_w * static_cast<int64_t>(sizeof(float));
  const int64_t conv_rows = std::max<int64_t>(p.kernel, kBandBytes / std::max<int64_t>(row_bytes, 1));
  const int64_t by_size = (conv_rows - p.kernel) / p.stride + 1;
  const int64_t bands_wanted = 4 * static_cast<int64_t>(threads);  // of each image (they run one at a time)
  const int64_t by_threads = bands_wanted > 1 ? (p.out_h + bands_wanted - 1) / bands_wanted : p.out_h;
  const int64_t rows = std::max<int64_t>(1, std::min(by_size, by_threads));
  // Whole groups of the pool's kPoolRowGroup output rows (a group's rows cost the same, used or not).
  return rows >= kPoolRowGroup ? rows / kPoolRowGroup * kPoolRowGroup : rows;
}

// Floats of one thread's band buffer (a 64-byte multiple).
inline size_t direct_conv_pool_thread_floats(const DirectConvShape& s, const DirectConvPool& p) {
  const int64_t band = s.out_channels * direct_conv_pool_band_conv_rows(p) * s.out_w;
  return static_cast<size_t>((band + 15) / 16 * 16);
}
// Every thread's phase rows (for a band's convolution rows), then every thread's band buffer.
inline size_t direct_conv_pool_workspace_bytes(const DirectConvShape& s, const DirectConvPool& p, int threads) {
  const size_t per_thread = static_cast<size_t>(direct_conv_phase_floats(s, direct_conv_pool_band_conv_rows(p))) +
                            direct_conv_pool_thread_floats(s, p);
  return static_cast<size_t>(std::max(threads, 1)) * per_thread * sizeof(float);
}

#if defined(__x86_64__)
// y = maxpool(act(conv(x, W) + bias)) with W packed by pack_direct_conv_weights; bias may be
// null. workspace: direct_conv_pool_workspace_bytes(s, p, threads), 64-byte aligned.
void direct_conv_pool_avx512(const DirectConvShape& s, const DirectConvPool& p, const float* x, const float* packed,
                             const float* bias, float* y, const Activation& activation, float* workspace,
                             int threads);

// y = act(conv(x, W) + bias + z) with W packed by pack_direct_conv_weights; bias and z may be
// null, z may be y. workspace: direct_conv_workspace_bytes(s, threads), 64-byte aligned.
void direct_conv_avx512(const DirectConvShape& s, const float* x, const float* packed, const float* bias,
                        const float* z, float* y, const Activation& activation, float* workspace, int threads);
#endif

}  // namespace edgert::cpu

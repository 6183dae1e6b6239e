#include "fast/conv_expand_depthwise.h"

#include <algorithm>
#include <cstring>

#include "thread_pool.h"

namespace edgert::cpu {

namespace {

// A band's expanded rows: with the one-thread GEMM's B block and the depthwise's reads, in L2.
constexpr int64_t kBandBytes = 384 << 10;

int64_t round16(int64_t floats) { return (floats + 15) / 16 * 16; }

}  // namespace

int64_t ExpandDepthwise::band_rows(int64_t expanded, const WindowGeometry& g) {
  const int64_t row_bytes = expanded * g.in[1] * static_cast<int64_t>(sizeof(float));
  const int64_t in_rows = std::max<int64_t>(g.kernel[0], kBandBytes / std::max<int64_t>(row_bytes, 1));
  return std::max<int64_t>(1, std::min(g.out[0], (in_rows - g.kernel[0]) / g.stride[0] + 1));
}

bool ExpandDepthwise::prepare(gemm::Isa isa, int64_t batch, int64_t channels, int64_t expanded,
                              const WindowGeometry& g, const float* w_pre, const float* w,
                              edgert_prepare_info& info) {
  if (g.rank != 2 || !gemm::isa_available(isa)) return false;
  const depthwise::Geometry dg{g.in[0], g.in[1], g.out[0], g.out[1], g.kernel[0], g.kernel[1], g.stride[0],
                               g.stride[1], g.dilation[0], g.dilation[1], g.pad_begin[0], g.pad_begin[1]};
  if (!depthwise::uses_padded_plane(dg)) return false;
  channel_ = depthwise::channel_portable;
#if defined(__x86_64__)
  if (isa == gemm::Isa::Avx2Fma) channel_ = depthwise::channel_avx2;
  if (isa == gemm::Isa::Avx512) channel_ = depthwise::channel_avx512;
#endif
  isa_ = isa;
  g_ = g;
  batch_ = batch;
  channels_ = channels;
  expanded_ = expanded;
  // The weights depend on nothing a prepare for other shapes changes: packed once.
  if (packed_from_ != w_pre || packed_.isa != isa || packed_.m != expanded || packed_.k != channels) {
    gemm::pack_a(isa, w_pre, expanded, channels, channels, 1, packed_);
    packed_from_ = w_pre;
  }
  if (w_from_ != w || w_.size() != static_cast<size_t>(expanded * g.kernel[0] * g.kernel[1])) {
    w_.assign(w, w + expanded * g.kernel[0] * g.kernel[1]);
    w_from_ = w;
  }
  band_rows_ = band_rows(expanded, g);
  threads_ = ThreadPool::instance().num_threads();
  info.workspace_bytes = static_cast<size_t>(threads_) * thread_floats() * sizeof(float);
  return true;
}

// Per thread: the band buffer, the GEMM's scratch, the depthwise kernel's padded plane.
size_t ExpandDepthwise::thread_floats() const {
  const int64_t in_rows = band_in_rows(band_rows_);
  const depthwise::Geometry band{in_rows, g_.in[1], band_rows_, g_.out[1], g_.kernel[0], g_.kernel[1],
                                 g_.stride[0], g_.stride[1], 1, 1, g_.pad_begin[0], g_.pad_begin[1]};
  const int64_t gemm_floats = static_cast<int64_t>(gemm::workspace_bytes(1, packed_, in_rows * g_.in[1]) / sizeof(float));
  return static_cast<size_t>(round16(expanded_ * in_rows * g_.in[1]) + round16(gemm_floats) +
                             round16(depthwise::scratch_floats(band)));
}

void ExpandDepthwise::execute(const float* x, const float* b_pre, const Activation& pre, const float* b,
                              const Activation& activation, float* y, void* workspace) const {
  const int64_t in_h = g_.in[0], in_w = g_.in[1], out_h = g_.out[0], out_w = g_.out[1];
  const int64_t stride = g_.stride[0], kernel = g_.kernel[0], pad_top = g_.pad_begin[0];
  const int64_t in_plane = in_h * in_w, out_plane = out_h * out_w, taps = g_.kernel[0] * g_.kernel[1];
  const int64_t max_rows = band_in_rows(band_rows_), band_plane = max_rows * in_w;
  const int64_t gemm_floats = static_cast<int64_t>(gemm::workspace_bytes(1, packed_, max_rows * in_w) / sizeof(float));
  const int64_t bands = (out_h + band_rows_ - 1) / band_rows_;
  gemm::Epilogue expand;
  expand.bias_row = b_pre;
  expand.activation = pre;
  for (int64_t n = 0; n < batch_; ++n) {
    const float* xn = x + n * channels_ * in_plane;
    float* yn = y + n * expanded_ * out_plane;
    ThreadPool::instance().parallel_ranges(
        bands,
        [&](int64_t begin, int64_t end, int thread) {
          float* band = static_cast<float*>(workspace) + static_cast<size_t>(thread) * thread_floats();
          float* gemm_scratch = band + round16(expanded_ * band_plane);
          float* dw_scratch = gemm_scratch + round16(gemm_floats);
          int64_t held0 = 0, held1 = 0;  // input rows [held0, held1) are in the buffer
          for (int64_t bi = begin; bi < end; ++bi) {
            const int64_t oy0 = bi * band_rows_, oy1 = std::min(out_h, oy0 + band_rows_);
            // The input rows [lo, hi) the band's windows span; those outside the image are padding.
            const int64_t lo = oy0 * stride - pad_top, hi = (oy1 - 1) * stride - pad_top + kernel;
            const int64_t r0 = std::max<int64_t>(0, lo), r1 = std::min(in_h, hi);
            int64_t first_new = r0;
            if (bi > begin && r0 >= held0 && r0 < held1) {
              for (int64_t e = 0; e < expanded_; ++e)
                std::memmove(band + e * band_plane, band + e * band_plane + (r0 - held0) * in_w,
                             static_cast<size_t>((held1 - r0) * in_w) * sizeof(float));
              first_new = held1;
            }
            if (r1 > first_new) {
              // Expanded rows [first_new, r1): columns first_new * W .. r1 * W of X's channel planes.
              gemm::BSource src;
              src.data = xn + first_new * in_w;
              src.row_stride = in_plane;
              const gemm::Output out{band + (first_new - r0) * in_w, band_plane, 1};
              gemm::sgemm(packed_, src, (r1 - first_new) * in_w, out, expand, gemm_scratch, 1);
            }
            held0 = r0, held1 = r1;
            // The band's output rows from the buffer: its rows are input rows r0.., and the
            // windows start r0 - lo rows above its first (padding only at the image's top).
            const depthwise::Geometry dg{r1 - r0, in_w, oy1 - oy0, out_w, kernel, g_.kernel[1], stride,
                                         g_.stride[1], 1, 1, r0 - lo, g_.pad_begin[1]};
            for (int64_t e = 0; e < expanded_; ++e)
              channel_(dg, band + e * band_plane, w_.data() + e * taps, b ? b[e] : 0.0f, nullptr,
                       yn + e * out_plane + oy0 * out_w, activation, dw_scratch);
          }
        },
        // One run of bands a thread: each run's first band expands the rows it shares with the
        // band before it again, and starts on a cold buffer (efficientnet_b0 and mobilenet_v2
        // 1.0-1.3% faster at 2 threads than with four runs a thread; two made no difference).
        threads_, 1);
  }
}

}  // namespace edgert::cpu

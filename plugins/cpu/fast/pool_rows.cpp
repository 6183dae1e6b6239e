#include "fast/pool_rows.h"

#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "fast/qlookup.h"
#include "gemm/sgemm.h"

#include "thread_pool.h"

namespace edgert::cpu {

namespace {

using U8PoolPlane = void (*)(const uint8_t* x, uint8_t* y, const U8PoolGeometry& g, uint8_t* scratch);

// The direct uint8 plane of tactic 56, 57 or 58 where this build and CPU run it; null otherwise.
U8PoolPlane u8_direct_plane(int64_t tactic) {
#if defined(__x86_64__)
  if (tactic == kMaxPoolU8Avx512VbmiTactic && qlookup::avx512_vbmi_available()) return max_pool_plane_u8_avx512vbmi;
  if (tactic == kMaxPoolU8Avx2Tactic && gemm::isa_available(gemm::Isa::Avx2Fma)) return max_pool_plane_u8_avx2;
#endif
#if defined(__aarch64__)
  if (tactic == kMaxPoolU8NeonTactic) return max_pool_plane_u8_neon;  // every ARMv8-A has Advanced SIMD
#endif
  (void)tactic;
  return nullptr;
}

}  // namespace

std::vector<TacticSpec> pool_tactics(const edgert_node* node, const edgert_tensor* inputs) {
  const edgert_tensor& x = inputs[0];
  if ((x.rank != 3 && x.rank != 4) || node->num_outputs > 1) return {};
  if (x.dtype == EDGERT_DTYPE_UINT8 && std::strcmp(node->op_type, "MaxPool") == 0) {
    std::vector<TacticSpec> out;
    Attributes attrs(node);
    const std::vector<int64_t> s = attrs.get_ints("strides", {1, 1}), d = attrs.get_ints("dilations", {1, 1});
    if (x.rank == 4 && s.size() == 2 && s[0] == s[1] && (s[0] == 1 || s[0] == 2) && d == std::vector<int64_t>{1, 1}) {
      for (const auto& [id, name] : {std::pair{kMaxPoolU8Avx512VbmiTactic, "u8-max-pool-direct-avx512vbmi"},
                                     std::pair{kMaxPoolU8Avx2Tactic, "u8-max-pool-direct-avx2"},
                                     std::pair{kMaxPoolU8NeonTactic, "u8-max-pool-direct-neon"}})
        if (u8_direct_plane(id)) out.push_back({id, name});
    }
    out.push_back({kMaxPoolU8RowsTactic, "u8-max-pool-2d-rows-portable"});
    return out;
  }
  if (x.dtype != EDGERT_DTYPE_FLOAT32) return {};
  std::vector<TacticSpec> out;
#if defined(__x86_64__)
  if (std::strcmp(node->op_type, "MaxPool") == 0 && x.rank == 4 && gemm::isa_available(gemm::Isa::Avx512)) {
    Attributes attrs(node);
    const std::vector<int64_t> k = attrs.get_ints("kernel_shape"), s = attrs.get_ints("strides", {1, 1}),
                               d = attrs.get_ints("dilations", {1, 1});
    if (k.size() == 2 && s.size() == 2 && d.size() == 2 && max_pool_avx512_applies(k[0], k[1], s[0], s[1], d[0], d[1]))
      out.push_back({kMaxPoolAvx512Tactic, "f32-max-pool-direct-avx512"});
  }
#endif
  out.push_back({kPoolRowsTactic, "f32-pool-2d-rows-portable"});
  return out;
}

std::vector<TacticSpec> global_average_tactics(const edgert_node*, const edgert_tensor* inputs) {
  if (inputs[0].dtype != EDGERT_DTYPE_FLOAT32) return {};
  std::vector<TacticSpec> out;
#if defined(__x86_64__)
  if (gemm::isa_available(gemm::Isa::Avx512)) out.push_back({kGlobalAverageAvx512Tactic, "f32-global-avgpool-rows-avx512"});
#endif
  out.push_back({kGlobalAverageRowsTactic, "f32-global-avgpool-rows-portable"});
  return out;
}

void global_average_rows(const float* x, float* y, int64_t planes, int64_t size, bool avx512) {
  auto plane_mean = [&](int64_t p) {
    const float* xp = x + p * size;
    float acc[8] = {};
    int64_t i = 0;
    for (; i + 8 <= size; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += xp[i + j];
    float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < size; ++i) sum += xp[i];
    y[p] = size > 0 ? sum / static_cast<float>(size) : 0.0f;
  };
  auto means = [&](int64_t begin, int64_t end, int) {
#if defined(__x86_64__)
    if (avx512) return plane_means_avx512(x + begin * size, y + begin, end - begin, size);
#else
    (void)avx512;
#endif
    for (int64_t p = begin; p < end; ++p) plane_mean(p);
  };
  if (planes * size < (1 << 15)) return means(0, planes, 0);
  ThreadPool::instance().parallel_ranges(planes, means);
}

namespace {

// Positions of one spatial dim's window that a divisor counts: inside the input, or (with
// count_include_pad) inside the input plus its explicit padding, as the reference counts them.
std::vector<float> window_counts(int64_t out, int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                                 int64_t pad_begin, int64_t pad_end, bool include_pad) {
  std::vector<float> counts(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    int64_t c = 0;
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t pos = o * stride - pad_begin + k * dilation;
      c += include_pad ? (pos >= -pad_begin && pos < in + pad_end) : (pos >= 0 && pos < in);
    }
    counts[static_cast<size_t>(o)] = static_cast<float>(c);
  }
  return counts;
}

}  // namespace

bool FastPool::prepare(int64_t tactic, bool max, bool count_include_pad, const WindowGeometry& g,
                       const edgert_tensor& x, int num_outputs) {
  const bool bytes = tactic == kMaxPoolU8RowsTactic || tactic == kMaxPoolU8Avx512VbmiTactic ||
                     tactic == kMaxPoolU8Avx2Tactic || tactic == kMaxPoolU8NeonTactic;
  if (tactic != kPoolRowsTactic && tactic != kMaxPoolAvx512Tactic && !bytes) return false;
  if (x.dtype != (bytes ? EDGERT_DTYPE_UINT8 : EDGERT_DTYPE_FLOAT32) || (bytes && !max) || num_outputs > 1 ||
      (g.rank != 1 && g.rank != 2))
    return false;
  max_ = max;
  planes_ = x.dims[0] * x.dims[1];
  const bool two_d = g.rank == 2;
  const int last = g.rank - 1;
  in_h_ = two_d ? g.in[0] : 1;
  in_w_ = g.in[last];
  out_h_ = two_d ? g.out[0] : 1;
  out_w_ = g.out[last];
  kernel_h_ = two_d ? g.kernel[0] : 1;
  kernel_w_ = g.kernel[last];
  stride_h_ = two_d ? g.stride[0] : 1;
  stride_w_ = g.stride[last];
  dilation_h_ = two_d ? g.dilation[0] : 1;
  dilation_w_ = g.dilation[last];
  pad_top_ = two_d ? g.pad_begin[0] : 0;
  pad_left_ = g.pad_begin[last];
  avx512_ = false;
  // Elsewhere (another CPU than the one tuned on, other strides) the rows below run instead.
  const bool direct_shape = two_d && stride_h_ == stride_w_ && (stride_h_ == 1 || stride_h_ == 2) &&
                            dilation_h_ == 1 && dilation_w_ == 1;
  u8_direct_ = direct_shape ? u8_direct_plane(tactic) : nullptr;
  threads_ = ThreadPool::instance().num_threads();
#if defined(__x86_64__)
  // Elsewhere (another CPU than the one tuned on, other shapes) the rows below run instead.
  avx512_ = tactic == kMaxPoolAvx512Tactic && max && two_d && gemm::isa_available(gemm::Isa::Avx512) &&
            max_pool_avx512_applies(kernel_h_, kernel_w_, stride_h_, stride_w_, dilation_h_, dilation_w_);
#endif
  if (!max) {
    row_count_ = two_d ? window_counts(out_h_, in_h_, kernel_h_, stride_h_, dilation_h_, pad_top_, g.pad_end[0],
                                       count_include_pad)
                       : std::vector<float>{1.0f};
    col_count_ = window_counts(out_w_, in_w_, kernel_w_, stride_w_, dilation_w_, pad_left_, g.pad_end[last],
                               count_include_pad);
  }
  return true;
}

void FastPool::execute(const float* x, float* y) const {
#if defined(__x86_64__)
  if (avx512_) {
    const int64_t in_plane = in_h_ * in_w_, out_plane = out_h_ * out_w_;
    ThreadPool::instance().parallel_ranges(planes_, [&](int64_t p0, int64_t p1, int) {
      for (int64_t plane = p0; plane < p1; ++plane)
        max_pool_plane_avx512(x + plane * in_plane, y + plane * out_plane, in_h_, in_w_, out_h_, out_w_, kernel_h_,
                              stride_h_, pad_top_, pad_left_);
    });
    return;
  }
#endif
  execute_rows(x, y);
}

size_t FastPool::workspace_bytes() const {
  if (!u8_direct_) return 0;
  const U8PoolGeometry g{in_h_, in_w_, out_h_, out_w_, kernel_h_, kernel_w_, stride_h_, pad_top_, pad_left_};
  return static_cast<size_t>(threads_) * static_cast<size_t>(u8_pool_padded_rows(g) * u8_pool_padded_cols(g));
}

void FastPool::execute(const uint8_t* x, uint8_t* y, void* workspace) const {
  if (u8_direct_) {
    const U8PoolGeometry g{in_h_, in_w_, out_h_, out_w_, kernel_h_, kernel_w_, stride_h_, pad_top_, pad_left_};
    const size_t per_thread = workspace_bytes() / static_cast<size_t>(threads_);
    const int64_t in_plane = in_h_ * in_w_, out_plane = out_h_ * out_w_;
    ThreadPool::instance().parallel_ranges(
        planes_,
        [&](int64_t p0, int64_t p1, int thread) {
          uint8_t* scratch = static_cast<uint8_t*>(workspace) + static_cast<size_t>(thread) * per_thread;
          for (int64_t plane = p0; plane < p1; ++plane)
            u8_direct_(x + plane * in_plane, y + plane * out_plane, g, scratch);
        },
        threads_);
    return;
  }
  execute_rows(x, y);
}

template <typename T>
void FastPool::execute_rows(const T* x, T* y) const {
  const int64_t in_plane = in_h_ * in_w_, out_plane = out_h_ * out_w_;
  const int64_t ow_n = out_w_, iw_n = in_w_, s = stride_w_;
  const auto pool_plane = [&](int64_t plane) {
    const T* xp = x + plane * in_plane;
    for (int64_t oy = 0; oy < out_h_; ++oy) {
      T* __restrict__ yrow = y + plane * out_plane + oy * ow_n;
      const T init = max_ ? std::numeric_limits<T>::lowest() : T(0);
      for (int64_t ox = 0; ox < ow_n; ++ox) yrow[ox] = init;
      for (int64_t ky = 0; ky < kernel_h_; ++ky) {
        const int64_t iy = oy * stride_h_ - pad_top_ + ky * dilation_h_;
        if (iy < 0 || iy >= in_h_) continue;
        const T* __restrict__ xrow = xp + iy * iw_n;
        for (int64_t kx = 0; kx < kernel_w_; ++kx) {
          const int64_t shift = kx * dilation_w_ - pad_left_;
          const int64_t lo = shift >= 0 ? 0 : (-shift + s - 1) / s;
          int64_t hi = iw_n - 1 - shift < 0 ? 0 : (iw_n - 1 - shift) / s + 1;
          hi = hi < ow_n ? hi : ow_n;
          const T* __restrict__ xs = xrow + shift;
          if (max_) {
            // `v > m` keeps NaN out, as the reference does.
            for (int64_t ox = lo; ox < hi; ++ox) {
              const T v = xs[ox * s];
              yrow[ox] = v > yrow[ox] ? v : yrow[ox];
            }
          } else if constexpr (std::is_same_v<T, float>) {
            for (int64_t ox = lo; ox < hi; ++ox) yrow[ox] += xs[ox * s];
          }
        }
      }
      if constexpr (std::is_same_v<T, float>) {
        if (max_) continue;
        const float rc = row_count_[static_cast<size_t>(oy)];
        for (int64_t ox = 0; ox < ow_n; ++ox) {
          const float count = rc * col_count_[static_cast<size_t>(ox)];
          yrow[ox] = count > 0.0f ? yrow[ox] / count : 0.0f;
        }
      }
    }
  };
  // Runs of planes, not a task per plane: the 128-256 small planes of squeezenet's pools each
  // claimed the pool's counter, whose cache line then went back and forth between the two
  // threads (3.8-15% of these pools at 2 threads).
  ThreadPool::instance().parallel_ranges(planes_, [&](int64_t p0, int64_t p1, int) {
    for (int64_t plane = p0; plane < p1; ++plane) pool_plane(plane);
  });
}

}  // namespace edgert::cpu

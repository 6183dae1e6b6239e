#include "fast/conv_winograd.h"

#include <algorithm>

#include "thread_pool.h"

namespace edgert::cpu {

namespace {

// Budget for the transformed input and output of one tile block (V and M, 16 matrices each):
// about the size of a core's L2, so the GEMMs and transforms stay out of DRAM.
constexpr int64_t kBlockBytes = 1 << 20;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

inline void transform_tile_in(const float (&d)[4][4], float* v, int64_t pos_stride) {
  float r[4][4];
  for (int j = 0; j < 4; ++j) {
    r[0][j] = d[0][j] - d[2][j];
    r[1][j] = d[1][j] + d[2][j];
    r[2][j] = d[2][j] - d[1][j];
    r[3][j] = d[1][j] - d[3][j];
  }
  for (int i = 0; i < 4; ++i) {
    v[(i * 4 + 0) * pos_stride] = r[i][0] - r[i][2];
    v[(i * 4 + 1) * pos_stride] = r[i][1] + r[i][2];
    v[(i * 4 + 2) * pos_stride] = r[i][2] - r[i][1];
    v[(i * 4 + 3) * pos_stride] = r[i][1] - r[i][3];
  }
}

inline void transform_tile_out(const float* m, int64_t pos_stride, float (&o)[2][2]) {
  float s[2][4];
  for (int j = 0; j < 4; ++j) {
    const float m0 = m[j * pos_stride], m1 = m[(4 + j) * pos_stride], m2 = m[(8 + j) * pos_stride],
                m3 = m[(12 + j) * pos_stride];
    s[0][j] = m0 + m1 + m2;
    s[1][j] = m1 - m2 - m3;
  }
  for (int i = 0; i < 2; ++i) {
    o[i][0] = s[i][0] + s[i][1] + s[i][2];
    o[i][1] = s[i][1] - s[i][2] - s[i][3];
  }
}

}  // namespace

void WinogradConv::prepare(gemm::Isa isa, const float* w, int64_t batch, int64_t channels, int64_t out_channels,
                           int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w, int64_t pad_top,
                           int64_t pad_left, int threads) {
  batch_ = batch;
  channels_ = channels;
  out_channels_ = out_channels;
  in_h_ = in_h;
  in_w_ = in_w;
  out_h_ = out_h;
  out_w_ = out_w;
  pad_top_ = pad_top;
  pad_left_ = pad_left;
  threads_ = threads;
  tiles_h_ = (out_h + 1) / 2;
  tiles_w_ = (out_w + 1) / 2;
  const int64_t tiles = tiles_h_ * tiles_w_;
  const int64_t nr = gemm::tile_cols(isa);
  const int64_t fit = kBlockBytes / static_cast<int64_t>(sizeof(float)) / (16 * (channels + out_channels));
  tile_block_ = std::min(round_up(tiles, 16), std::max<int64_t>(nr, fit / nr * nr));
  // Blocks are the unit of parallel work: enough of them for every thread when the image allows.
  if (threads > 1) {
    const int64_t per_thread = round_up((tiles + threads - 1) / threads, 16);
    tile_block_ = std::max<int64_t>(16, std::min(tile_block_, per_thread));
  }

  // U = G g G^T with G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1], laid out [16][M][C].
  std::vector<float> u(static_cast<size_t>(16 * out_channels * channels));
  for (int64_t m = 0; m < out_channels; ++m) {
    for (int64_t c = 0; c < channels; ++c) {
      const float* g = w + (m * channels + c) * 9;
      float gg[4][3];
      for (int j = 0; j < 3; ++j) {
        gg[0][j] = g[j];
        gg[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        gg[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        gg[3][j] = g[6 + j];
      }
      for (int i = 0; i < 4; ++i) {
        const float t[4] = {gg[i][0], 0.5f * (gg[i][0] + gg[i][1] + gg[i][2]), 0.5f * (gg[i][0] - gg[i][1] + gg[i][2]),
                            gg[i][2]};
        for (int j = 0; j < 4; ++j) u[static_cast<size_t>(((i * 4 + j) * out_channels + m) * channels + c)] = t[j];
      }
    }
  }
  u_.assign(16, gemm::PackedA{});
  for (int pos = 0; pos < 16; ++pos)
    gemm::pack_a(isa, u.data() + static_cast<size_t>(pos) * out_channels * channels, out_channels, channels, channels,
                 1, u_[static_cast<size_t>(pos)]);
}

// The 16 matrices of V (and of M) are pos_stride floats apart: their size plus one cache line,
// so the 16 streams a tile transform reads or writes do not all fall in one cache set.
int64_t WinogradConv::v_stride() const { return channels_ * tile_block_ + 16; }
int64_t WinogradConv::m_stride() const { return out_channels_ * tile_block_ + 16; }

// Per thread: V, M and the scratch of a one-thread GEMM, 64-byte multiples.
int64_t WinogradConv::thread_floats() const {
  return 16 * (v_stride() + m_stride()) + static_cast<int64_t>(gemm::workspace_bytes(1) / sizeof(float));
}

size_t WinogradConv::workspace_bytes() const {
  return static_cast<size_t>(threads_ * thread_floats()) * sizeof(float);
}

// V = B^T d B with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] for tiles [t0, t0 + count) of
// one channel; element pos of tile t goes to v[pos * pos_stride + t - t0]. Tiles wholly inside
// the image take a loop over the tile row the compiler vectorizes.
void WinogradConv::input_transform(const float* plane, int64_t t0, int64_t count, float* v, int64_t pos_stride) const {
  int64_t t = t0;
  const int64_t t_end = t0 + count;
  while (t < t_end) {
    const int64_t ty = t / tiles_w_, tx_begin = t % tiles_w_;
    const int64_t tx_end = std::min(tiles_w_, tx_begin + (t_end - t));
    const int64_t iy0 = 2 * ty - pad_top_;
    const bool rows_inside = iy0 >= 0 && iy0 + 4 <= in_h_;
    // Interior columns: 2 * tx - pad_left >= 0 and 2 * tx - pad_left + 4 <= in_w.
    int64_t lo = (pad_left_ + 1) / 2, hi = (in_w_ - 4 + pad_left_) >= 0 ? (in_w_ - 4 + pad_left_) / 2 + 1 : 0;
    lo = std::max(lo, tx_begin);
    hi = std::min(hi, tx_end);
    if (!rows_inside || lo >= hi) lo = hi = tx_end;
    float* vt = v + (t - t0) - tx_begin;  // vt[tx] is this row's tile tx
    for (int64_t tx = tx_begin; tx < tx_end; ++tx) {
      if (tx == lo) {
        const float* r0 = plane + iy0 * in_w_ - pad_left_;
        const float* r1 = r0 + in_w_;
        const float* r2 = r1 + in_w_;
        const float* r3 = r2 + in_w_;
        for (int64_t x = lo; x < hi; ++x) {
          const int64_t c0 = 2 * x;
          float d[4][4];
          for (int j = 0; j < 4; ++j) {
            d[0][j] = r0[c0 + j];
            d[1][j] = r1[c0 + j];
            d[2][j] = r2[c0 + j];
            d[3][j] = r3[c0 + j];
          }
          transform_tile_in(d, vt + x, pos_stride);
        }
        tx = hi - 1;
        continue;
      }
      float d[4][4];
      const int64_t ix0 = 2 * tx - pad_left_;
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const int64_t iy = iy0 + i, ix = ix0 + j;
          d[i][j] = iy >= 0 && iy < in_h_ && ix >= 0 && ix < in_w_ ? plane[iy * in_w_ + ix] : 0.0f;
        }
      transform_tile_in(d, vt + tx, pos_stride);
    }
    t += tx_end - tx_begin;
  }
}

// Y = A^T Mt A with A^T = [1 1 1 0; 0 1 -1 -1], plus bias and Z, for one output channel;
// element pos of tile t is mt[pos * pos_stride + t - t0]. Z may be Y (read before written).
void WinogradConv::output_transform(const float* mt, int64_t pos_stride, int64_t t0, int64_t count, float bias,
                                    const float* z, float* y) const {
  int64_t t = t0;
  const int64_t t_end = t0 + count;
  while (t < t_end) {
    const int64_t ty = t / tiles_w_, tx_begin = t % tiles_w_;
    const int64_t tx_end = std::min(tiles_w_, tx_begin + (t_end - t));
    const int64_t oy = 2 * ty;
    const bool two_rows = oy + 2 <= out_h_;
    // Tiles whose two columns both exist: 2 * tx + 2 <= out_w.
    const int64_t full_end = two_rows ? std::min(tx_end, out_w_ / 2) : tx_begin;
    const float* mrow = mt + (t - t0) - tx_begin;
    float* y0 = y + oy * out_w_;
    float* y1 = y0 + out_w_;
    const float* z0 = z ? z + oy * out_w_ : nullptr;
    const float* z1 = z ? z0 + out_w_ : nullptr;
    for (int64_t tx = tx_begin; tx < full_end; ++tx) {
      float o[2][2];
      transform_tile_out(mrow + tx, pos_stride, o);
      const int64_t ox = 2 * tx;
      float a = o[0][0] + bias, b = o[0][1] + bias, c = o[1][0] + bias, d = o[1][1] + bias;
      if (z) {
        a = a + z0[ox];
        b = b + z0[ox + 1];
        c = c + z1[ox];
        d = d + z1[ox + 1];
      }
      y0[ox] = a;
      y0[ox + 1] = b;
      y1[ox] = c;
      y1[ox + 1] = d;
    }
    for (int64_t tx = std::max(tx_begin, full_end); tx < tx_end; ++tx) {
      float o[2][2];
      transform_tile_out(mrow + tx, pos_stride, o);
      for (int i = 0; i < 2 && oy + i < out_h_; ++i)
        for (int j = 0; j < 2 && 2 * tx + j < out_w_; ++j) {
          const int64_t at = (oy + i) * out_w_ + 2 * tx + j;
          float v = o[i][j] + bias;
          if (z) v = v + z[at];
          y[at] = v;
        }
    }
    t += tx_end - tx_begin;
  }
}

void WinogradConv::execute(const float* x, const float* bias, const float* z, float* y, const Activation& activation,
                           void* workspace) const {
  const int64_t tiles = tiles_h_ * tiles_w_, tb = tile_block_, C = channels_, M = out_channels_;
  const int64_t in_plane = in_h_ * in_w_, out_plane = out_h_ * out_w_;
  const int64_t vs = v_stride(), ms = m_stride(), blocks = (tiles + tb - 1) / tb;
  ThreadPool& pool = ThreadPool::instance();
  // One parallel region per image: each task runs a whole tile block (transform in, 16
  // one-thread GEMMs, transform out) in its thread's scratch, so threads meet once per layer
  // instead of once per step (which costs dearly when a core is shared).
  for (int64_t n = 0; n < batch_; ++n) {
    const float* xn = x + n * C * in_plane;
    float* yn = y + n * M * out_plane;
    const float* zn = z ? z + n * M * out_plane : nullptr;
    pool.parallel_for(
        blocks,
        [&](int64_t block, int thread) {
          float* v_buf = static_cast<float*>(workspace) + thread * thread_floats();
          float* m_buf = v_buf + 16 * vs;
          void* gemm_ws = m_buf + 16 * ms;
          const int64_t t0 = block * tb, count = std::min(tb, tiles - t0);
          for (int64_t c = 0; c < C; ++c) input_transform(xn + c * in_plane, t0, count, v_buf + c * tb, vs);
          for (int pos = 0; pos < 16; ++pos) {
            gemm::BSource b;
            b.data = v_buf + pos * vs;
            b.row_stride = tb;
            gemm::Output out{m_buf + pos * ms, tb, 1};
            gemm::sgemm(u_[static_cast<size_t>(pos)], b, count, out, gemm::Epilogue{}, gemm_ws, 1);
          }
          for (int64_t m = 0; m < M; ++m)
            output_transform(m_buf + m * tb, ms, t0, count, bias ? bias[m] : 0.0f,
                             zn ? zn + m * out_plane : nullptr, yn + m * out_plane);
        },
        threads_);
    if (activation.kind != ActivationKind::None)
      pool.parallel_for(M, [&](int64_t m, int) { gemm::apply_activation(yn + m * out_plane, out_plane, activation); });
  }
}

}  // namespace edgert::cpu

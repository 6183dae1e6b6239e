#include "fast/conv_winograd.h"

#include <algorithm>
#include <vector>

#include "fast/winograd_tiles.h"
#include "thread_pool.h"

namespace edgert::cpu {

namespace {

// Budget for the transformed input and output of one tile block (V and M, 16 matrices each):
// about the size of a core's L2, so the GEMMs and transforms stay out of DRAM.
constexpr int64_t kBlockBytes = 1 << 20;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// With several threads, tile blocks on threads (each block's transforms and GEMMs on one thread:
// one meeting per layer, V and M stay in that core's cache) or the whole image as one block with
// each step spread (transforms over channels, GEMMs over positions: three meetings, V and M cross
// between cores). With blocks every thread streams all the transformed weights, which for
// resnet18's 256- and 512-channel layers (4 and 16 MB) is most of their time, and few tiles make
// uneven blocks (a block's GEMM costs whole column panels: 49 tiles went 32 + 17). Spread pays
// there when it costs the busiest thread no more panel products and V and M stay within 2.5 MB.
// Measured as whole models, runs of the two alternated in one process at 2 threads: resnet18
// 3% faster (its 14x14 and 7x7 stages spread); squeezenet's 196-tile layers (weights under 0.3
// MB) 4% slower spread, hence the weights' threshold. Its 13x13 layers (1-2.4 MB of weights,
// F(4x4)'s 16 tiles made two blocks of 8, each GEMM computing 16 columns and each thread
// streaming all the weights) run twice as fast spread (0.33 -> 0.16 ms each), so the threshold
// is 1 MB, not the 3 MB first chosen from resnet18's layers.
constexpr int64_t kSpreadMinWeights = 1 << 20;
constexpr int64_t kSpreadMaxBytes = 5 << 19;

bool spread_steps_pays(int64_t tiles, int64_t block, int64_t nr, int64_t positions, int64_t threads,
                       int64_t weight_bytes, int64_t whole_bytes) {
  if (weight_bytes < kSpreadMinWeights || whole_bytes > kSpreadMaxBytes) return false;
  // Blocks go to whichever thread is free first: in order, to the least loaded one.
  std::vector<int64_t> load(static_cast<size_t>(threads), 0);
  for (int64_t t0 = 0; t0 < tiles; t0 += block) {
    const int64_t panels = (std::min(block, tiles - t0) + nr - 1) / nr;
    *std::min_element(load.begin(), load.end()) += panels * positions;
  }
  const int64_t blocks_busiest = *std::max_element(load.begin(), load.end());
  const int64_t spread_busiest = (positions + threads - 1) / threads * ((tiles + nr - 1) / nr);
  return spread_busiest <= blocks_busiest;
}

// The transform matrices of F(m x m, 3 x 3) (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks"): Y = A^T [(G g G^T) . (B^T d B)] A over tiles of alpha = m + 2 inputs.
template <int M>
struct Transforms;

template <>
struct Transforms<2> {
  static constexpr int kAlpha = 4;
  static constexpr float kBT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr float kG[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  static constexpr float kAT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};

// Points 0, +-1, +-2 and infinity.
template <>
struct Transforms<4> {
  static constexpr int kAlpha = 6;
  static constexpr float kBT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                      {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr float kG[6][3] = {{1.0f / 4, 0, 0},
                                     {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                     {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                     {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                     {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                     {0, 0, 1}};
  static constexpr float kAT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// sum_k c[k] * x[k] over the non-zero constant coefficients (zeros are skipped at compile time:
// 0 * x is not foldable under IEEE rules, 1 * x and -1 * x are).
template <int N>
inline float combine(const float (&c)[N], const float* x, int64_t stride) {
  float sum = 0.0f;
  bool first = true;
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) {
    if (c[k] == 0.0f) continue;
    const float term = c[k] * x[k * stride];
    sum = first ? term : sum + term;
    first = false;
  }
  return sum;
}

// V = B^T d B for one tile: element (i, j) goes to v[(i * alpha + j) * pos_stride].
template <int M>
inline void transform_tile_in(const float (&d)[Transforms<M>::kAlpha][Transforms<M>::kAlpha], float* v,
                              int64_t pos_stride) {
  using T = Transforms<M>;
  constexpr int A = T::kAlpha;
  float r[A][A];
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < A; ++j) r[i][j] = combine(T::kBT[i], &d[0][j], A);
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < A; ++j) v[(i * A + j) * pos_stride] = combine(T::kBT[j], &r[i][0], 1);
}

// O = A^T m A for one tile, element (i, j) of m at m[(i * alpha + j) * pos_stride].
template <int M>
inline void transform_tile_out(const float* m, int64_t pos_stride, float (&o)[M][M]) {
  using T = Transforms<M>;
  constexpr int A = T::kAlpha;
  float col[A], s[M][A];
#pragma GCC unroll 8
  for (int j = 0; j < A; ++j) {
#pragma GCC unroll 8
    for (int k = 0; k < A; ++k) col[k] = m[(k * A + j) * pos_stride];
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) s[i][j] = combine(T::kAT[i], col, 1);
  }
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < M; ++j) o[i][j] = combine(T::kAT[j], &s[i][0], 1);
}

// U = G g G^T of one 3x3 filter, element (i, j) to u[(i * alpha + j) * pos_stride].
template <int M>
void transform_filter(const float* g, float* u, int64_t pos_stride) {
  using T = Transforms<M>;
  constexpr int A = T::kAlpha;
  // Unrolled, so combine() sees constant coefficients and drops the zeros at compile time; as
  // loops it tested every coefficient at run time, and the transforms of resnet18's filters
  // were a fifth of a warm build (the builder's prepare, then the self-test's engine load).
  float gg[A][3];
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < 3; ++j) gg[i][j] = combine(T::kG[i], g + j, 3);
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < A; ++j) u[(i * A + j) * pos_stride] = combine(T::kG[j], &gg[i][0], 1);
}

// V = B^T d B for tiles [t0, t0 + count) of one channel; element pos of tile t goes to
// v[pos * pos_stride + t - t0]. Tiles wholly inside the image read their rows directly.
template <int M>
void input_tiles(const TileGeometry& g, const float* plane, int64_t t0, int64_t count, float* v, int64_t pos_stride) {
  constexpr int A = Transforms<M>::kAlpha;
  int64_t t = t0;
  const int64_t t_end = t0 + count;
  while (t < t_end) {
    const int64_t ty = t / g.tiles_w, tx_begin = t % g.tiles_w;
    const int64_t tx_end = std::min(g.tiles_w, tx_begin + (t_end - t));
    const int64_t iy0 = M * ty - g.pad_top;
    const bool rows_inside = iy0 >= 0 && iy0 + A <= g.in_h;
    float* vt = v + (t - t0) - tx_begin;  // vt[tx] is this row's tile tx
    for (int64_t tx = tx_begin; tx < tx_end; ++tx) {
      float d[A][A];
      const int64_t ix0 = M * tx - g.pad_left;
      if (rows_inside && ix0 >= 0 && ix0 + A <= g.in_w) {
        const float* r = plane + iy0 * g.in_w + ix0;
        for (int i = 0; i < A; ++i)
          for (int j = 0; j < A; ++j) d[i][j] = r[i * g.in_w + j];
      } else {
        for (int i = 0; i < A; ++i)
          for (int j = 0; j < A; ++j) {
            const int64_t iy = iy0 + i, ix = ix0 + j;
            d[i][j] = iy >= 0 && iy < g.in_h && ix >= 0 && ix < g.in_w ? plane[iy * g.in_w + ix] : 0.0f;
          }
      }
      transform_tile_in<M>(d, vt + tx, pos_stride);
    }
    t += tx_end - tx_begin;
  }
}

// Y = A^T Mt A plus bias and Z for one output channel; element pos of tile t is
// mt[pos * pos_stride + t - t0]. Z may be Y (read before written).
template <int M>
void output_tiles(const TileGeometry& g, const float* mt, int64_t pos_stride, int64_t t0, int64_t count, float bias,
                  const float* z, float* y) {
  int64_t t = t0;
  const int64_t t_end = t0 + count;
  while (t < t_end) {
    const int64_t ty = t / g.tiles_w, tx_begin = t % g.tiles_w;
    const int64_t tx_end = std::min(g.tiles_w, tx_begin + (t_end - t));
    const int64_t oy = M * ty;
    const float* mrow = mt + (t - t0) - tx_begin;
    for (int64_t tx = tx_begin; tx < tx_end; ++tx) {
      float o[M][M];
      transform_tile_out<M>(mrow + tx, pos_stride, o);
      const int64_t ox = M * tx;
      const int rows = static_cast<int>(std::min<int64_t>(M, g.out_h - oy));
      const int cols = static_cast<int>(std::min<int64_t>(M, g.out_w - ox));
      for (int i = 0; i < rows; ++i) {
        float* yr = y + (oy + i) * g.out_w + ox;
        const float* zr = z ? z + (oy + i) * g.out_w + ox : nullptr;
        for (int j = 0; j < cols; ++j) {
          float v = o[i][j] + bias;
          if (zr) v = v + zr[j];
          yr[j] = v;
        }
      }
    }
    t += tx_end - tx_begin;
  }
}

}  // namespace

void WinogradConv::prepare(gemm::Isa isa, int tile, const float* w, int64_t batch, int64_t channels,
                           int64_t out_channels, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w,
                           int64_t pad_top, int64_t pad_left, int threads) {
  tile_ = tile == 4 ? 4 : 2;
  avx512_transforms_ = (isa == gemm::Isa::Avx512 || gemm::is_tall(isa)) && gemm::isa_available(isa);
  const int64_t positions = this->positions();
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
  tiles_h_ = (out_h + tile_ - 1) / tile_;
  tiles_w_ = (out_w + tile_ - 1) / tile_;
  const int64_t tiles = tiles_h_ * tiles_w_;
  const int64_t nr = gemm::tile_cols(isa);
  const int64_t fit = kBlockBytes / static_cast<int64_t>(sizeof(float)) / (positions * (channels + out_channels));
  tile_block_ = std::min(round_up(tiles, 16), std::max<int64_t>(nr, fit / nr * nr));
  // Blocks are the unit of parallel work: a multiple of the thread count when the image allows,
  // so no thread waits for another's last block (784 tiles in blocks of 128 made 4 + 3).
  if (threads > 1) {
    const int64_t blocks = round_up((tiles + tile_block_ - 1) / tile_block_, threads);
    tile_block_ = std::max<int64_t>(8, round_up((tiles + blocks - 1) / blocks, 8));
    // Or the whole image as one block, each step spread over the threads (execute).
    const int64_t weight_bytes = positions * out_channels * channels * static_cast<int64_t>(sizeof(float));
    const int64_t whole = round_up(tiles, 8);
    const int64_t whole_bytes = positions * (channels + out_channels) * whole * static_cast<int64_t>(sizeof(float));
    if (spread_steps_pays(tiles, tile_block_, nr, positions, threads, weight_bytes, whole_bytes)) tile_block_ = whole;
  }

  // U = G g G^T, one matrix [M][C] per position, packed for the GEMM as it is made: the filters of
  // one panel of output channels and up to kChannelStep input channels at a time into `rows`
  // ([positions][panel rows][channels of the step]), then each position's part into its packed
  // matrix (gemm::pack_a_panel). Written straight into [positions][M][C], the positions of one
  // filter lay M x C floats apart and every write missed the cache (resnet18's layer4 took 40 ms
  // a node at engine load); through a whole [positions][M][C] copy first, warm builds spent a
  // tenth of their time faulting in and filling it.
  // Spread over the threads by whole panels of rows (no two threads write one panel's lines).
  // U depends on the filters, the tile and the ISA only: a prepare for other shapes keeps it
  // (and keeps borrowing it when it came with the engine: prepared_state.h).
  if (u_from_ == w && u_tile_ == tile_ && u_isa_ == isa && static_cast<int64_t>(u_.size()) == positions &&
      u_.front().m == out_channels && u_.front().k == channels)
    return;
  u_from_ = w;
  u_tile_ = tile_;
  u_isa_ = isa;
  constexpr int64_t kChannelStep = 16;
  u_.assign(static_cast<size_t>(positions), gemm::PackedA{});
  bool all_stored = true;
  for (gemm::PackedA& u : u_) {
    gemm::pack_a_begin(isa, out_channels, channels, u);
    all_stored = all_stored && u.stored;
  }
  // U came with the engine (prepared_state.h): the filters are not even read.
  if (all_stored) return;
  const int64_t mr = gemm::tile_rows(isa), panels = (out_channels + mr - 1) / mr;
  const int64_t step = std::min(channels, kChannelStep);
  ThreadPool::instance().parallel_ranges(
      panels,
      [&](int64_t p0, int64_t p1, int) {
        std::vector<float> rows(static_cast<size_t>(positions * mr * step));
        for (int64_t panel = p0; panel < p1; ++panel) {
          const int64_t m0 = panel * mr, m1 = std::min(out_channels, m0 + mr);
          for (int64_t c0 = 0; c0 < channels; c0 += step) {
            const int64_t c1 = std::min(channels, c0 + step);
            for (int64_t m = m0; m < m1; ++m) {
              for (int64_t c = c0; c < c1; ++c) {
                const float* g = w + (m * channels + c) * 9;
                float* u = rows.data() + (m - m0) * step + (c - c0);
                if (tile_ == 4) {
                  transform_filter<4>(g, u, mr * step);
                } else {
                  transform_filter<2>(g, u, mr * step);
                }
              }
            }
            for (int64_t pos = 0; pos < positions; ++pos)
              gemm::pack_a_panel(u_[static_cast<size_t>(pos)], panel, rows.data() + pos * mr * step, step, 1, c0, c1);
          }
        }
      },
      threads);
}

int64_t WinogradConv::positions() const { return (tile_ + 2) * (tile_ + 2); }

// The matrices of V (and of M) are pos_stride floats apart: their size plus one cache line,
// so the streams a tile transform reads or writes do not all fall in one cache set.
int64_t WinogradConv::v_stride() const { return channels_ * tile_block_ + 16; }
int64_t WinogradConv::m_stride() const { return out_channels_ * tile_block_ + 16; }

// Per thread: V, M and the scratch of a one-thread GEMM, 64-byte multiples.
int64_t WinogradConv::thread_floats() const {
  // The GEMM's B block grows with A's k block (the tall tile packs K in one block).
  const int64_t kc = u_.empty() ? 0 : u_.front().kc;
  return positions() * (v_stride() + m_stride()) + static_cast<int64_t>(gemm::workspace_bytes(1, kc) / sizeof(float));
}

size_t WinogradConv::workspace_bytes() const {
  return static_cast<size_t>(threads_ * thread_floats()) * sizeof(float);
}

size_t WinogradConv::state_bytes() const {
  size_t bytes = 0;
  for (const gemm::PackedA& u : u_) bytes += gemm::state_bytes(u);
  return bytes;
}

void WinogradConv::execute(const float* x, const float* bias, const float* z, float* y, const Activation& activation,
                           void* workspace) const {
  const int64_t tiles = tiles_h_ * tiles_w_, tb = tile_block_, C = channels_, M = out_channels_;
  const int64_t in_plane = in_h_ * in_w_, out_plane = out_h_ * out_w_, positions = this->positions();
  const int64_t vs = v_stride(), ms = m_stride(), blocks = (tiles + tb - 1) / tb;
  const TileGeometry geometry{in_h_, in_w_, out_h_, out_w_, pad_top_, pad_left_, tiles_w_};
  ThreadPool& pool = ThreadPool::instance();
  // AVX-512 tactics transform 16 tiles per vector, the activation included.
#if defined(__x86_64__)
  const bool vector = avx512_transforms_;
  const bool activation_done = vector && winograd_activation_in_lanes(activation.kind);
#else
  const bool activation_done = false;
#endif
  const auto transform_in = [&](const float* xn, int64_t t0, int64_t count, float* v_buf, int64_t c) {
#if defined(__x86_64__)
    if (vector && tile_ == 2)
      return winograd_input_tiles_f23_avx512(geometry, xn + c * in_plane, t0, count, v_buf + c * tb, vs);
    if (vector) return winograd_input_tiles_f43_avx512(geometry, xn + c * in_plane, t0, count, v_buf + c * tb, vs);
#endif
    if (tile_ == 4) {
      input_tiles<4>(geometry, xn + c * in_plane, t0, count, v_buf + c * tb, vs);
    } else {
      input_tiles<2>(geometry, xn + c * in_plane, t0, count, v_buf + c * tb, vs);
    }
  };
  const auto multiply = [&](const float* v_buf, float* m_buf, int64_t count, void* gemm_ws, int64_t pos) {
    gemm::BSource b;
    b.data = v_buf + pos * vs;
    b.row_stride = tb;
    gemm::Output out{m_buf + pos * ms, tb, 1};
    gemm::sgemm(u_[static_cast<size_t>(pos)], b, count, out, gemm::Epilogue{}, gemm_ws, 1);
  };
  const auto transform_out = [&](const float* m_buf, int64_t t0, int64_t count, const float* zn, float* yn,
                                 int64_t m) {
    const float b = bias ? bias[m] : 0.0f;
    const float* zm = zn ? zn + m * out_plane : nullptr;
#if defined(__x86_64__)
    if (vector) {
      const Activation& act = activation_done ? activation : Activation{};
      const auto out = tile_ == 2 ? winograd_output_tiles_f23_avx512 : winograd_output_tiles_f43_avx512;
      return out(geometry, m_buf + m * tb, ms, t0, count, b, zm, yn + m * out_plane, act);
    }
#endif
    if (tile_ == 4) {
      output_tiles<4>(geometry, m_buf + m * tb, ms, t0, count, b, zm, yn + m * out_plane);
    } else {
      output_tiles<2>(geometry, m_buf + m * tb, ms, t0, count, b, zm, yn + m * out_plane);
    }
  };
  for (int64_t n = 0; n < batch_; ++n) {
    const float* xn = x + n * C * in_plane;
    float* yn = y + n * M * out_plane;
    const float* zn = z ? z + n * M * out_plane : nullptr;
    if (blocks >= threads_ || threads_ == 1) {
      // One parallel region per image: each task runs a whole tile block (transform in, one
      // one-thread GEMM per position, transform out) in its thread's scratch, so threads meet
      // once per layer instead of once per step (which costs dearly when a core is shared).
      pool.parallel_for(
          blocks,
          [&](int64_t block, int thread) {
            float* v_buf = static_cast<float*>(workspace) + thread * thread_floats();
            float* m_buf = v_buf + positions * vs;
            void* gemm_ws = m_buf + positions * ms;
            const int64_t t0 = block * tb, count = std::min(tb, tiles - t0);
            for (int64_t c = 0; c < C; ++c) transform_in(xn, t0, count, v_buf, c);
            for (int64_t pos = 0; pos < positions; ++pos) multiply(v_buf, m_buf, count, gemm_ws, pos);
            for (int64_t m = 0; m < M; ++m) transform_out(m_buf, t0, count, zn, yn, m);
          },
          threads_);
    } else {
      // Fewer tile blocks than threads (small images, deep layers: resnet's 7x7 stage has 16
      // tiles): each step is spread instead, over channels, positions and output channels. V
      // and M live in thread 0's scratch; each thread multiplies in its own GEMM scratch.
      float* v_buf = static_cast<float*>(workspace);
      float* m_buf = v_buf + positions * vs;
      for (int64_t block = 0; block < blocks; ++block) {
        const int64_t t0 = block * tb, count = std::min(tb, tiles - t0);
        pool.parallel_ranges(
            C, [&](int64_t c0, int64_t c1, int) { for (int64_t c = c0; c < c1; ++c) transform_in(xn, t0, count, v_buf, c); },
            threads_);
        pool.parallel_for(
            positions,
            [&](int64_t pos, int thread) {
              void* gemm_ws = static_cast<float*>(workspace) + thread * thread_floats() + positions * (vs + ms);
              multiply(v_buf, m_buf, count, gemm_ws, pos);
            },
            threads_);
        pool.parallel_ranges(
            M,
            [&](int64_t m0, int64_t m1, int) {
              for (int64_t m = m0; m < m1; ++m) transform_out(m_buf, t0, count, zn, yn, m);
            },
            threads_);
      }
    }
    if (activation.kind != ActivationKind::None && !activation_done)
      pool.parallel_ranges(M, [&](int64_t m0, int64_t m1, int) {
        gemm::apply_activation(yn + m0 * out_plane, (m1 - m0) * out_plane, activation);  // planes are contiguous
      });
  }
}

}  // namespace edgert::cpu

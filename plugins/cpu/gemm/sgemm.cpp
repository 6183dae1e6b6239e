// Packed layouts:
//   A: for each k block (kc rows of K, the last one shorter), for each panel of MR rows of A:
//      kc x MR floats, row index fastest; rows past m are zero. Block (p0, panel) starts at
//      p0 * m_padded + panel * MR * kc_len.
//   B: per task and k block, for each panel of NR columns: kc x NR floats; columns past the
//      task's end are zero.
// Loops (BLIS order): columns in blocks of kNC, K in blocks of kc (B block in L2), then A panels
// (one A panel in L1 while the B panels stream past it).
#include "gemm/sgemm.h"

#include <algorithm>
#include <cstring>

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "edgert/float16.h"
#include "gemm/bf16_pairs.h"
#include "gemm/im2col_panel.h"
#include "gemm/microkernels.h"
#include "prepared_state.h"
#include "thread_pool.h"

namespace edgert::cpu::gemm {

namespace {

constexpr int64_t kKC = 256;
constexpr int64_t kNC = 128;  // columns per B block (rounded down to whole panels)
constexpr int kMaxTile = 48 * 8;  // the largest tile (48x8 > 8x32)
constexpr int64_t kMaxNR = kMaxPanelColumns;

// A tall tile packs A as one k block, and each B block of nc columns has all of A stream past
// it (from L3 for the 2 MB of squeezenet's classifier, 600 KB of a 960-wide projection):
// its B blocks are up to kTallNC columns and kTallBlockFloats (384 KB, beside A's 48-row panel
// in a 1 MB L2). With 128 KB blocks, squeezenet's classifier (K 512, 169 columns) streamed A
// three times, mobilenet_v2's 7x7 projections (K 960, 49 columns) twice.
constexpr int64_t kTallNC = 256;
constexpr int64_t kTallBlockFloats = 96 << 10;
// A tall tile's last panel with this many columns or fewer multiplies those only.
constexpr int64_t kTallNarrowColumns = 3;

// Per-thread B block: kKC x kNC, or (A packed as one long k block) kc rows of at least one
// panel and up to a tall tile's block.
int64_t thread_scratch_floats(int64_t kc) {
  const int64_t tall_block = kc > kKC ? std::min(kTallBlockFloats, kc * kTallNC) : 0;
  return std::max({kKC * kNC, kc * kMaxNR, tall_block});
}

int64_t k_block(int64_t k) {
  const int64_t blocks = std::max<int64_t>(1, (k + kKC - 1) / kKC);
  return (k + blocks - 1) / blocks;
}

int64_t padded_rows(int64_t m, int64_t mr) { return (m + mr - 1) / mr * mr; }

// The families whose products are in a reduced precision: A and B are packed as 16-bit values.
bool is_reduced(Isa isa) { return isa == Isa::Avx512Bf16 || isa == Isa::NeonFp16; }
// Float slots that `rows` rows of A over k values take: bfloat16 pairs of k two to a slot
// (bf16_pairs.h), float16 values of one k two rows to a slot (mr even), floats one each.
int64_t a_floats(Isa isa, int64_t k, int64_t rows) {
  if (isa == Isa::Avx512Bf16) return rows * ((k + 1) / 2);
  if (isa == Isa::NeonFp16) return (k * rows + 1) / 2;
  return k * rows;
}
// Where the panel of A's rows from `panel` * mr starts in k block p0 (of kc_len values); every k
// block but the last has an even length for bfloat16 pairs, so p0 is even there.
int64_t a_panel_offset(Isa isa, int64_t p0, int64_t kc_len, int64_t m_padded, int64_t panel, int64_t mr) {
  return a_floats(isa, p0, m_padded) + a_floats(isa, kc_len, panel * mr);
}

// Turns the packed float B panels of one k block (kc rows, `columns` wide in panels of the
// tile's width) into the reduced family's 16-bit values where they lie.
void b_panels_to_reduced(Isa isa, float* panels, int64_t kc, int64_t columns) {
#if defined(__x86_64__)
  if (isa == Isa::Avx512Bf16)
    for (int64_t j = 0; j < columns; j += kMaxPanelColumns) bf16_pairs_in_place_avx512bf16(panels + j * kc, kc);
#elif defined(__aarch64__)
  if (isa == Isa::NeonFp16)
    for (int64_t j = 0; j < columns; j += 16) fp16_in_place_neon(panels + j * kc, kc);
#endif
  (void)isa, (void)panels, (void)kc, (void)columns;
}

// Column panels below this many per thread leave the threads to split A's rows.
constexpr int64_t kColumnPanelsPerThread = 2;
// B packed once for all threads is used up to this size (floats); larger B keeps per-task blocks.
constexpr int64_t kMaxSharedB = 2 << 20;
// B read in place from this many floats on (1 MB) has its next panel prefetched: a panel's K
// rows are K streams, too many for the hardware prefetchers, and each row's two lines came
// from L3 on demand. A 1x1 convolution 128 -> 16 on 55x55 (squeezenet1_1) 0.164 -> 0.146 ms;
// B that stays in L2 (shufflenet's 1x1s on 28x28 and 14x14) ran 3-5% slower with it.
constexpr int64_t kInPlacePrefetchFloats = 1 << 18;

// Whether threads split B's columns (each task then reads all of A) rather than A's rows (each
// reads all of B): columns when there are enough panels and B is at least as wide as A is tall.
// On a 7x7 image the tall tile has 7 column panels, and splitting those made every task stream
// all the weights.
bool split_columns(int64_t threads, Isa isa, int64_t m, int64_t n) {
  const int64_t nr = tile_cols(isa), n_panels = (n + nr - 1) / nr;
  return n_panels >= kColumnPanelsPerThread * threads && n >= m;
}

// Floats of B packed whole (k x n rounded up to panels) when sgemm with `threads` threads
// would split A's rows and pack B in every task; 0 when it would not.
int64_t shared_b_floats(int64_t threads, Isa isa, int64_t m, int64_t k, int64_t n) {
  if (threads < 2 || k == 0 || split_columns(threads, isa, m, n)) return 0;
  const int64_t nr = tile_cols(isa), floats = k * ((n + nr - 1) / nr) * nr;
  return floats <= kMaxSharedB ? floats : 0;
}

MicroKernel micro_kernel(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx2Fma: return ukernel_6x16_avx2;
    case Isa::Avx512: return ukernel_8x32_avx512;
    case Isa::Avx512Tall: return ukernel_48x7_avx512_tall;
    case Isa::Avx512Tall8: return ukernel_48x8_avx512_tall;
    case Isa::Avx512Bf16: return ukernel_8x32_avx512bf16;
#endif
#if defined(__aarch64__)
    case Isa::Neon: return ukernel_6x16_neon;
    case Isa::NeonFp16: return ukernel_8x16_neonfp16;
#endif
    default: return ukernel_6x16_portable;
  }
}

// Rows [p0, p0 + kc) of the im2col panel of columns [jp, jp + w) (w <= nr; columns past w are
// zero). The panel's output-row segments are found once, and (channel, ky, kx) advance with p:
// computed per row with three divisions, they cost as much as the copying.
void pack_im2col_panel(const BSource& b, int64_t nr, int64_t p0, int64_t kc, int64_t jp, int64_t w, float* dst) {
  PanelSegment segments[kMaxPanelColumns];
  const int count = panel_segments(b, jp, w, segments);
  const int64_t plane = b.in_h * b.in_w, sw = b.stride_w;
  Im2colRow at(b, p0);
  for (int64_t p = 0; p < kc; ++p, dst += nr, at.next(b)) {
    const float* src = b.data + at.c * plane;
    for (int s = 0; s < count; ++s) {
      const PanelSegment& g = segments[s];
      float* d = dst + g.j;
      const int64_t iy = g.oy * b.stride_h - b.pad_top + at.ky * b.dilation_h;
      if (iy < 0 || iy >= b.in_h) {
        std::fill_n(d, g.len, 0.0f);
        continue;
      }
      const float* row = src + iy * b.in_w;
      const int64_t ix0 = g.ox * sw - b.pad_left + at.kx * b.dilation_w;
      int64_t lo, hi;
      inside_columns(ix0, sw, b.in_w, g.len, &lo, &hi);
      std::fill_n(d, lo, 0.0f);
      if (sw == 1) {
        if (hi > lo) std::memcpy(d + lo, row + ix0 + lo, static_cast<size_t>(hi - lo) * sizeof(float));
      } else {
        for (int64_t t = lo; t < hi; ++t) d[t] = row[ix0 + t * sw];
      }
      std::fill_n(d + hi, g.len - hi, 0.0f);
    }
    std::fill_n(dst + w, nr - w, 0.0f);
  }
}

void pack_b(const BSource& b, int64_t nr, int64_t p0, int64_t kc, int64_t j0, int64_t j_end, float* dst) {
#if defined(__x86_64__)
  static const bool avx512 = isa_available(Isa::Avx512);
  static const bool avx512vl = avx512 && __builtin_cpu_supports("avx512vl");
  const bool wide_panels = avx512 && nr == kMaxPanelColumns;
#endif
  for (int64_t jp = j0; jp < j_end; jp += nr) {
    const int64_t w = std::min<int64_t>(nr, j_end - jp);
#if defined(__x86_64__)
    if (avx512vl && (nr == 7 || nr == 8) && b.kind == BSource::Kind::Strided && b.col_stride == 1) {
      pack_strided_narrow_panel_avx512(b.data + p0 * b.row_stride + jp, b.row_stride, kc, nr, w, dst,
                                       b.row_scale ? b.row_scale + p0 : nullptr);
      dst += nr * kc;
      continue;
    }
    if (wide_panels && b.kind == BSource::Kind::Strided && b.col_stride == 1) {
      pack_strided_panel_avx512(b.data + p0 * b.row_stride + jp, b.row_stride, kc, w, dst,
                                b.row_scale ? b.row_scale + p0 : nullptr);
      dst += nr * kc;
      continue;
    }
    if (avx512vl && (nr == 7 || nr == 8) && b.kind == BSource::Kind::Im2col &&
        pack_im2col_narrow_panel_avx512(b, p0, kc, nr, jp, w, dst)) {
      dst += nr * kc;
      continue;
    }
    if (wide_panels && b.kind == BSource::Kind::Im2col && (b.stride_w == 1 || b.stride_w == 2)) {
      pack_im2col_panel_avx512(b, p0, kc, jp, w, dst);
      dst += nr * kc;
      continue;
    }
#endif
    if (b.kind == BSource::Kind::Strided) {
      const float* src = b.data + p0 * b.row_stride + jp * b.col_stride;
      for (int64_t p = 0; p < kc; ++p, src += b.row_stride, dst += nr) {
        if (b.row_scale) {
          const float scale = b.row_scale[p0 + p];
          for (int64_t j = 0; j < w; ++j) dst[j] = src[j * b.col_stride] * scale;
        } else if (b.col_stride == 1) {
          for (int64_t j = 0; j < w; ++j) dst[j] = src[j];
        } else {
          for (int64_t j = 0; j < w; ++j) dst[j] = src[j * b.col_stride];
        }
        for (int64_t j = w; j < nr; ++j) dst[j] = 0.0f;
      }
      continue;
    }
    pack_im2col_panel(b, nr, p0, kc, jp, w, dst);
    dst += nr * kc;
  }
}

// Whether sgemm reads b in place (BSource::in_place) with a's micro-kernel.
bool reads_b_in_place(const PackedA& a, const BSource& b) {
  return b.in_place && (a.isa == Isa::Avx512 || a.isa == Isa::Avx512Tall) && b.kind == BSource::Kind::Strided &&
         b.col_stride == 1 && !b.row_scale && isa_available(Isa::Avx512);
}

// Whether the last k block adds bias and addend as it stores each tile (beta 1, unit column
// strides): the addend is then read right before the same element is written, which is what
// makes an addend aliasing Y correct (with A packed as one k block; see sgemm.h).
bool addend_inline(const Output& y, const Epilogue& ep) {
  return ep.addend && ep.beta == 1.0f && ep.addend_col_stride == 1 && y.col_stride == 1;
}

void finish_tile(const Output& y, const Epilogue& ep, int64_t i0, int64_t mr, int64_t j0, int64_t nr,
                 bool linear_done) {
  if (linear_done) {
    for (int64_t r = 0; r < mr; ++r) apply_activation(y.data + (i0 + r) * y.row_stride + j0, nr, ep.activation);
    return;
  }
  for (int64_t r = 0; r < mr; ++r) {
    const int64_t i = i0 + r;
    float* row = y.data + i * y.row_stride + j0 * y.col_stride;
    const float br = ep.bias_row ? ep.bias_row[i] : 0.0f;
    const float* add = ep.addend ? ep.addend + i * ep.addend_row_stride + j0 * ep.addend_col_stride : nullptr;
    if (y.col_stride == 1) {
      if (ep.alpha != 1.0f)
        for (int64_t j = 0; j < nr; ++j) row[j] *= ep.alpha;
      if (ep.bias_row)
        for (int64_t j = 0; j < nr; ++j) row[j] += br;
      if (ep.bias_col)
        for (int64_t j = 0; j < nr; ++j) row[j] += ep.bias_col[j0 + j];
      if (add) {
        if (ep.beta == 1.0f && ep.addend_col_stride == 1) {
          for (int64_t j = 0; j < nr; ++j) row[j] += add[j];
        } else {
          for (int64_t j = 0; j < nr; ++j) row[j] += ep.beta * add[j * ep.addend_col_stride];
        }
      }
      apply_activation(row, nr, ep.activation);
      continue;
    }
    for (int64_t j = 0; j < nr; ++j) {
      float v = row[j * y.col_stride];
      if (ep.alpha != 1.0f) v *= ep.alpha;
      if (ep.bias_row) v += br;
      if (ep.bias_col) v += ep.bias_col[j0 + j];
      if (add) v += ep.beta == 1.0f ? add[j * ep.addend_col_stride] : ep.beta * add[j * ep.addend_col_stride];
      row[j * y.col_stride] = ep.activation.apply(v);
    }
  }
}

// Whether full AVX-512 tiles (8x32, or the tall 48x7 / 48x8) can finish the epilogue in the
// micro-kernel's registers (one store per element instead of finish_tile's passes): the same
// operations in the same order, so the results are the same bits.
bool fused_epilogue_applies(Isa isa, const Output& y, const Epilogue& ep) {
#if defined(__x86_64__)
  if ((isa != Isa::Avx512 && !is_tall(isa)) || y.col_stride != 1 || ep.alpha != 1.0f || ep.bias_col) return false;
  if (ep.addend && !addend_inline(y, ep)) return false;
  switch (ep.activation.kind) {
    case ActivationKind::None: case ActivationKind::Relu: case ActivationKind::Clip: case ActivationKind::HardSwish:
    case ActivationKind::Sigmoid: case ActivationKind::SiLU:
      return true;
    default: return false;
  }
#else
  (void)isa, (void)y, (void)ep;
  return false;
#endif
}

struct Job {
  MicroKernel kernel;
  int64_t mr, nr;
  const PackedA* a;
  const BSource* b;
  int64_t n;
  const Output* y;
  const Epilogue* ep;
  float* scratch;
  int64_t n_tasks, n_panels;
  // Tasks split A's rows in units of this many (a tall tile's 16-row vectors; else whole
  // panels): m_units of them, in m_parts runs; a run is cut at A's panel boundaries into
  // part_chunks tasks (m_tasks() of them in all), the last ones empty where a
  // run has fewer panels.
  int64_t row_unit, m_units;
  int64_t m_parts = 1, part_chunks = 1;

  // A's rows in one run of row units a thread, each cut where A's panels end.
  void split_rows_in_runs(int64_t threads) {
    m_parts = std::min(m_units, threads);
    const int64_t per_panel = mr / row_unit;
    for (int64_t part = 0; part < m_parts; ++part) {
      const int64_t u0 = part * m_units / m_parts, u1 = (part + 1) * m_units / m_parts;
      part_chunks = std::max(part_chunks, (u1 + per_panel - 1) / per_panel - u0 / per_panel);
    }
  }

  int64_t m_tasks() const { return m_parts * part_chunks; }

  // Rows [r0, r1) of row task tm (empty when r0 >= r1).
  void task_rows(int64_t tm, int64_t& r0, int64_t& r1) const {
    const int64_t part = tm / part_chunks, c = tm % part_chunks;
    const int64_t u0 = part * m_units / m_parts, u1 = (part + 1) * m_units / m_parts;
    const int64_t per_panel = mr / row_unit, first_panel = u0 / per_panel;
    const int64_t c0 = c == 0 ? u0 : (first_panel + c) * per_panel;
    const int64_t c1 = c == part_chunks - 1 ? u1 : std::min(u1, (first_panel + c + 1) * per_panel);
    r0 = c0 * row_unit;
    r1 = c0 >= u1 ? r0 : std::min(a->m, c1 * row_unit);
  }
  // B packed whole (k block p0 at p0 * n_panels * nr, its panels kc x nr each), or null:
  // each task packs the columns it needs.
  float* shared_b = nullptr;
  // B read in place and too large to stay in L2: the 8x32 tile prefetches the next panel's rows
  // as it reads its own (kInPlacePrefetchFloats).
  bool prefetch_b = false;

  // Packs k block `unit / n_panels`, panel `unit % n_panels` of B into shared_b.
  void pack_shared(int64_t unit) const {
    const int64_t kc = a->kc, p0 = unit / n_panels * kc, jp = unit % n_panels * nr;
    const int64_t kcl = std::min(kc, a->k - p0);
    float* panel = shared_b + p0 * n_panels * nr + jp * kcl;
    pack_b(*b, nr, p0, kcl, jp, std::min(n, jp + nr), panel);
    if (is_reduced(a->isa)) b_panels_to_reduced(a->isa, panel, kcl, nr);
  }

  // C (ldc apart) = [C +] A panel x B panel (ldb apart) for a strip of mv rows and nv columns,
  // with the micro-kernel for that: in place (8x32), an 8x32 tile's first 16 columns, 16 or 32
  // rows of a tall tile, or the ISA's.
  void multiply(int64_t kc, const float* ap, const float* bp, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                int64_t mv, int64_t nv) const {
#if defined(__x86_64__)
    if (ldb != nr && a->isa == Isa::Avx512Tall)
      return ukernel_tall_in_place_avx512(static_cast<int>((mv + 15) / 16), kc, ap, bp, ldb, c, ldc, accumulate);
    if (ldb != nr) return ukernel_8x32_avx512_in_place(kc, ap, bp, ldb, c, ldc, accumulate, prefetch_b);
    if (a->isa == Isa::Avx512 && nv <= 16) return ukernel_8x16_of_32_avx512(kc, ap, bp, ldb, c, ldc, accumulate);
    if (is_tall(a->isa) && nv <= kTallNarrowColumns)
      return ukernel_tall_narrow_avx512(static_cast<int>((mv + 15) / 16), static_cast<int>(nr), static_cast<int>(nv), kc,
                                        ap, bp, c, ldc, accumulate);
    if (is_tall(a->isa) && mv <= 32)
      return ukernel_tall_rows_avx512(static_cast<int>((mv + 15) / 16), static_cast<int>(nr), kc, ap, bp, c, ldc,
                                      accumulate);
#else
    (void)ldb, (void)mv, (void)nv;
#endif
    kernel(kc, ap, bp, c, ldc, accumulate);
  }

  // The same for a whole tile that finishes its epilogue in the kernel (fused_epilogue_applies).
  void multiply_finished(int64_t kc, const float* ap, const float* bp, int64_t ldb, float* c, bool accumulate,
                         const TileEpilogue& te, int64_t mv) const {
#if defined(__x86_64__)
    if (ldb != nr && a->isa == Isa::Avx512)
      return ukernel_8x32_avx512_in_place_epilogue(kc, ap, bp, ldb, c, y->row_stride, accumulate, te, prefetch_b);
    if (a->isa == Isa::Avx512) return ukernel_8x32_avx512_epilogue(kc, ap, bp, c, y->row_stride, accumulate, te);
    ukernel_48xn_avx512_tall_epilogue(static_cast<int>(mv / 16), static_cast<int>(nr), kc, ap, bp, ldb, c,
                                      y->row_stride, accumulate, te);
#else
    (void)kc, (void)ap, (void)bp, (void)ldb, (void)c, (void)accumulate, (void)te, (void)mv;
#endif
  }

  TileEpilogue tile_epilogue(int64_t i0, int64_t jp) const {
    TileEpilogue te;
    te.bias_row = ep->bias_row ? ep->bias_row + i0 : nullptr;
    te.addend = ep->addend ? ep->addend + i0 * ep->addend_row_stride + jp : nullptr;
    te.addend_ld = ep->addend_row_stride;
    te.kind = ep->activation.kind;
    te.p0 = ep->activation.p0;
    te.p1 = ep->activation.p1;
    return te;
  }

  void run(int64_t task, int thread) const {
    const int64_t tm = task / n_tasks, tn = task % n_tasks;
    int64_t r0, r1;
    task_rows(tm, r0, r1);
    if (r0 >= r1) return;
    const int64_t j0 = tn * n_panels / n_tasks * nr, j1 = std::min(n, (tn + 1) * n_panels / n_tasks * nr);
    const int64_t m = a->m, k = a->k, kc = a->kc, m_padded = padded_rows(m, mr);
    const int64_t scratch_floats = thread_scratch_floats(kc);
    float* bpack = scratch + static_cast<size_t>(thread) * static_cast<size_t>(scratch_floats);
    // Columns per B block: kNC (a tall tile: kTallNC), fewer when the k block is long.
    const int64_t nc_cap = is_tall(a->isa) ? kTallNC : kNC;
    const int64_t nc = std::max(nr, std::min(nc_cap, scratch_floats / kc) / nr * nr);
    const bool inline_add = addend_inline(*y, *ep);
    const bool fusable = fused_epilogue_applies(a->isa, *y, *ep);
    alignas(64) float tile[kMaxTile];
    const bool in_place = reads_b_in_place(*a, *b);
    for (int64_t jb = j0; jb < j1; jb += nc) {
      const int64_t jb_end = std::min(j1, jb + nc);
      // In place, only a last, narrower panel is packed (its loads would run past B's columns).
      const int64_t whole_end = in_place ? jb + (jb_end - jb) / nr * nr : jb;
      for (int64_t p0 = 0; p0 < k; p0 += kc) {
        const int64_t kcl = std::min(kc, k - p0);
        const bool first = p0 == 0, last = p0 + kcl == k;
        const float* bblock = bpack;
        if (in_place) {
          if (whole_end < jb_end) pack_b(*b, nr, p0, kcl, whole_end, jb_end, bpack);
        } else if (shared_b) {
          bblock = shared_b + p0 * n_panels * nr + jb * kcl;
        } else {
          pack_b(*b, nr, p0, kcl, jb, jb_end, bpack);
          if (is_reduced(a->isa)) b_panels_to_reduced(a->isa, bpack, kcl, jb_end - jb);
        }
        // Strips of rows [i0, i0 + mv) within one panel of A: whole panels, or part of one where
        // the task's rows start or end inside it (a tall panel's 16-row vectors: its kernel reads
        // A from the strip's first row on, 48 floats a k step as ever).
        for (int64_t i0 = r0, mv = 0; i0 < r1; i0 += mv) {
          const int64_t ip = i0 / mr, sub = i0 - ip * mr;
          mv = std::min({r1, (ip + 1) * mr, m}) - i0;
          const float* ap = a->values() + a_panel_offset(a->isa, p0, kcl, m_padded, ip, mr) + sub;
          // Whole tiles of a strip of full height finish in the kernel; the rest (the block's last,
          // narrower panel, or every tile of a shorter strip) in finish_tile below. A 1x1 conv on
          // 13x13 (169 columns in blocks of 63) had its last block's whole tiles finished apart.
          const bool fused_strip = fusable && last && (mv == mr || (is_tall(a->isa) && mv % 16 == 0));
          const int64_t fused_end = fused_strip ? jb + (jb_end - jb) / nr * nr : jb;
          for (int64_t jp = jb; jp < jb_end; jp += nr) {
            // In place, B's own rows (b's row stride apart); else the packed panel (nr apart).
            const bool whole_in_place = jp < whole_end;
            const float* bp = whole_in_place ? b->data + p0 * b->row_stride + jp
                              : in_place     ? bpack  // the one packed panel
                                             : bblock + (jp - jb) * kcl;
            const int64_t ldb = whole_in_place ? b->row_stride : nr;
            const int64_t nv = std::min(nr, jb_end - jp);
            float* c = y->data + i0 * y->row_stride + jp * y->col_stride;
            if (jp < fused_end) {
              multiply_finished(kcl, ap, bp, ldb, c, !first, tile_epilogue(i0, jp), mv);
              continue;
            }
            if (mv == mr && nv == nr && y->col_stride == 1 && !(last && inline_add)) {
              multiply(kcl, ap, bp, ldb, c, y->row_stride, !first, mv, nv);
              continue;
            }
            multiply(kcl, ap, bp, ldb, tile, nr, false, mv, nv);
            for (int64_t r = 0; r < mv; ++r) {
              const float* t = tile + r * nr;
              if (last && inline_add) {
                // acc, then alpha, bias, addend in the order of the unfused graph.
                const int64_t i = i0 + r;
                float* dst = c + r * y->row_stride;
                const float* zr = ep->addend + i * ep->addend_row_stride + jp;
                const float br = ep->bias_row ? ep->bias_row[i] : 0.0f;
                const float* bc = ep->bias_col ? ep->bias_col + jp : nullptr;
                for (int64_t j = 0; j < nv; ++j) {
                  float v = first ? t[j] : dst[j] + t[j];
                  if (ep->alpha != 1.0f) v *= ep->alpha;
                  if (ep->bias_row) v += br;
                  if (bc) v += bc[j];
                  dst[j] = v + zr[j];
                }
                continue;
              }
              if (y->col_stride == 1) {
                // Unit stride: loops the compiler vectorizes (edge tiles are frequent when M
                // is not a multiple of the tile rows).
                float* dst = c + r * y->row_stride;
                if (first) {
                  for (int64_t j = 0; j < nv; ++j) dst[j] = t[j];
                } else {
                  for (int64_t j = 0; j < nv; ++j) dst[j] += t[j];
                }
                continue;
              }
              for (int64_t j = 0; j < nv; ++j) {
                float& dst = c[r * y->row_stride + j * y->col_stride];
                dst = first ? t[j] : dst + t[j];
              }
            }
          }
          // The epilogue once per row strip of the column block (still in L1): longer vector
          // loops and fewer calls than once per tile, which matters when K is small.
          if (last && fused_end < jb_end) finish_tile(*y, *ep, i0, mv, fused_end, jb_end - fused_end, inline_add);
        }
      }
    }
  }
};

}  // namespace

// Vector extensions (GCC and clang): 4-lane vectors the compiler maps to SSE, NEON or whatever the
// baseline has, so the portable kernel is still register-blocked.
typedef float Vec4 __attribute__((vector_size(16), aligned(4)));

void ukernel_6x16_portable(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  Vec4 acc[6][4] = {};
  for (int64_t p = 0; p < kc; ++p, a += 6, b += 16) {
    Vec4 bv[4];
    std::memcpy(bv, b, sizeof bv);
    for (int r = 0; r < 6; ++r) {
      const float av = a[r];
      for (int q = 0; q < 4; ++q) acc[r][q] += av * bv[q];
    }
  }
  for (int r = 0; r < 6; ++r) {
    float* row = c + r * ldc;
    for (int q = 0; q < 4; ++q) {
      Vec4 v = acc[r][q];
      if (accumulate) {
        Vec4 old;
        std::memcpy(&old, row + 4 * q, sizeof old);
        v += old;
      }
      std::memcpy(row + 4 * q, &v, sizeof v);
    }
  }
}

int tile_rows(Isa isa) {
  return is_tall(isa) ? 48 : isa == Isa::Avx512 || isa == Isa::Avx512Bf16 || isa == Isa::NeonFp16 ? 8 : 6;
}
int tile_cols(Isa isa) {
  switch (isa) {
    case Isa::Avx512: case Isa::Avx512Bf16: return 32;
    case Isa::Avx512Tall: return 7;
    case Isa::Avx512Tall8: return 8;
    default: return 16;
  }
}

bool isa_available(Isa isa) {
  switch (isa) {
    case Isa::Portable: return true;
    case Isa::Avx2Fma:
#if defined(__x86_64__)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
      return false;
#endif
    case Isa::Neon:
#if defined(__aarch64__)
      return true;
#else
      return false;
#endif
    case Isa::Avx512:
    case Isa::Avx512Tall:
    case Isa::Avx512Tall8:
#if defined(__x86_64__)
      return __builtin_cpu_supports("avx512f");
#else
      return false;
#endif
    case Isa::NeonFp16:
#if defined(__aarch64__)
      return (getauxval(AT_HWCAP) & HWCAP_FPHP) && (getauxval(AT_HWCAP) & HWCAP_ASIMDHP);
#else
      return false;
#endif
    case Isa::Avx512Bf16:
#if defined(__x86_64__)
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512bf16");
#else
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  static const Isa isa = isa_available(Isa::Avx512)    ? Isa::Avx512
                         : isa_available(Isa::Avx2Fma) ? Isa::Avx2Fma
                         : isa_available(Isa::Neon)    ? Isa::Neon
                                                       : Isa::Portable;
  return isa;
}

namespace {

void set_layout(Isa isa, int64_t m, int64_t k, bool one_k_block, PackedA& out) {
  out.m = m;
  out.k = k;
  out.isa = isa;
  // The tall tile's C leaves the registers transposed, too dear to repeat for every k block
  // (k blocks of 96 to 256 rows, to keep the A panel in L1: 2-9% slower on 960 -> 160 at 7x7).
  out.kc = one_k_block || is_tall(isa) ? std::max<int64_t>(k, 1) : k_block(k);
  // bfloat16 pairs: every k block but the last of even length, so no pair straddles two blocks.
  if (isa == Isa::Avx512Bf16 && out.kc < k) out.kc += out.kc % 2;
}

}  // namespace

PackedA packed_a_layout(Isa isa, int64_t m, int64_t k) {
  PackedA layout;
  set_layout(isa, m, k, false, layout);
  return layout;
}

void pack_a_begin(Isa isa, int64_t m, int64_t k, PackedA& out, bool one_k_block) {
  set_layout(isa, m, k, one_k_block, out);
  const int64_t mr = tile_rows(isa), m_padded = padded_rows(m, mr);
  const int64_t slots = a_floats(isa, k, m_padded);
  out.data.clear();
  const prepared::Key key{prepared::kPackedA, static_cast<int64_t>(isa), m, k, out.kc};
  out.stored = prepared::take(key, static_cast<size_t>(slots));
  if (out.stored) {
    out.data.shrink_to_fit();
    return;
  }
  out.data.resize(static_cast<size_t>(slots));  // uninitialized: pack_a_panel writes rows [0, m)
  // Recorded now, written by pack_a_panel before the prepare that exports it ends.
  prepared::record(key, out.data.data(), out.data.size());
  // Rows past m are zeros: the last panel's, in every k block (the reduced families' packing
  // writes them itself).
  const int64_t last = m_padded - mr, rows = m - last;
  if (rows == mr || is_reduced(isa)) return;
  for (int64_t p0 = 0; p0 < k; p0 += out.kc) {
    const int64_t kcl = std::min(out.kc, k - p0);
    float* panel = out.data.data() + p0 * m_padded + last * kcl;
    for (int64_t p = 0; p < kcl; ++p) std::fill(panel + p * mr + rows, panel + (p + 1) * mr, 0.0f);
  }
}

namespace {

// pack_a_panel for the reduced families, rows past m as zeros. bfloat16: A(i, p) and A(i, p + 1)
// in one slot, slot (p / 2) * mr + i of the block; float16: A(i, p) at halfword p * mr + i.
// Whole rows of K only (pack_a), so every pair lies inside [k_begin, k_end).
void pack_a_panel_reduced(PackedA& out, int64_t panel, const float* src, int64_t row_stride, int64_t col_stride) {
  const int64_t mr = tile_rows(out.isa), m_padded = padded_rows(out.m, mr);
  const int64_t rows = std::min(mr, out.m - panel * mr);
  for (int64_t p0 = 0; p0 < out.k; p0 += out.kc) {
    const int64_t kcl = std::min(out.kc, out.k - p0);
    float* block = out.data.data() + a_panel_offset(out.isa, p0, kcl, m_padded, panel, mr);
    for (int64_t r = 0; r < mr; ++r) {
      const float* row = src + r * row_stride + p0 * col_stride;
      auto at = [&](int64_t p) { return r < rows && p < kcl ? row[p * col_stride] : 0.0f; };
      if (out.isa == Isa::Avx512Bf16) {
        for (int64_t p = 0; p < kcl; p += 2) block[(p / 2) * mr + r] = bfloat16_pair(at(p), at(p + 1));
      } else {
        for (int64_t p = 0; p < kcl; ++p) {
          const uint16_t half = edgert_float_to_half(at(p));
          std::memcpy(reinterpret_cast<char*>(block) + 2 * (p * mr + r), &half, sizeof half);
        }
      }
    }
  }
}

}  // namespace

// The 4 x 4 block of floats at src (rows src_stride apart) stored transposed at dst (rows
// dst_stride apart), turned in registers (__builtin_shufflevector: GCC 12 and clang both have it).
inline void store_4x4_transposed(const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
  Vec4 v[4];
  for (int q = 0; q < 4; ++q) std::memcpy(&v[q], src + q * src_stride, sizeof(Vec4));
  const Vec4 t0 = __builtin_shufflevector(v[0], v[1], 0, 4, 1, 5), t1 = __builtin_shufflevector(v[0], v[1], 2, 6, 3, 7);
  const Vec4 t2 = __builtin_shufflevector(v[2], v[3], 0, 4, 1, 5), t3 = __builtin_shufflevector(v[2], v[3], 2, 6, 3, 7);
  const Vec4 column[4] = {__builtin_shufflevector(t0, t2, 0, 1, 4, 5), __builtin_shufflevector(t0, t2, 2, 3, 6, 7),
                          __builtin_shufflevector(t1, t3, 0, 1, 4, 5), __builtin_shufflevector(t1, t3, 2, 3, 6, 7)};
  for (int q = 0; q < 4; ++q) std::memcpy(dst + q * dst_stride, &column[q], sizeof(Vec4));
}

// Columns [k_begin, k_end) of the rows of one panel, 16 columns at a time: the 16 x mr floats
// those fill in the panel (3 KB for the tall tile) stay in L1 while every row adds its 16, read
// as one cache line. Row by row, each value went mr floats past the last (the whole panel, up to
// 48 x 4608 floats, between two values of a row), every store missed the cache, and packing
// weights was a quarter of a warm resnet18 build (twice: the builder's own prepare and the
// self-test's engine load).
void pack_a_panel(PackedA& out, int64_t panel, const float* src, int64_t row_stride, int64_t col_stride,
                  int64_t k_begin, int64_t k_end) {
  if (out.stored) return;
  if (is_reduced(out.isa)) return pack_a_panel_reduced(out, panel, src, row_stride, col_stride);
  constexpr int64_t kColumns = 16;
  const int64_t mr = tile_rows(out.isa), m_padded = padded_rows(out.m, mr);
  const int64_t rows = std::min(mr, out.m - panel * mr);
  for (int64_t p0 = k_begin / out.kc * out.kc; p0 < k_end; p0 += out.kc) {
    const int64_t kcl = std::min(out.kc, out.k - p0);
    const int64_t lo = std::max(p0, k_begin), hi = std::min(p0 + kcl, k_end);
    float* block = out.data.data() + p0 * m_padded + panel * mr * kcl;
    for (int64_t pb = lo; pb < hi; pb += kColumns) {
      const int64_t len = std::min(kColumns, hi - pb);
      int64_t r = 0;
      if (col_stride == 1) {
        // Four rows at a time: 4 x 4 blocks turned in registers, a 4-float store per column.
        for (; r + 4 <= rows; r += 4) {
          const float* from = src + r * row_stride + (pb - k_begin);
          float* to = block + (pb - p0) * mr + r;
          int64_t p = 0;
          for (; p + 4 <= len; p += 4) store_4x4_transposed(from + p, row_stride, to + p * mr, mr);
          for (; p < len; ++p)
            for (int q = 0; q < 4; ++q) to[p * mr + q] = from[q * row_stride + p];
        }
      }
      for (; r < rows; ++r) {
        const float* from = src + r * row_stride + (pb - k_begin) * col_stride;
        float* to = block + (pb - p0) * mr + r;
        if (col_stride == 1) {
          for (int64_t p = 0; p < len; ++p) to[p * mr] = from[p];
        } else {
          for (int64_t p = 0; p < len; ++p) to[p * mr] = from[p * col_stride];
        }
      }
    }
  }
}

void pack_a(Isa isa, const float* src, int64_t m, int64_t k, int64_t row_stride, int64_t col_stride, PackedA& out,
            bool one_k_block) {
  pack_a_begin(isa, m, k, out, one_k_block);
  if (out.stored) return;
  // Spread over the threads by whole panels (no two threads write one panel's lines): engine
  // loads and the builder's shape inference and self-test pack every layer's weights.
  const int64_t mr = tile_rows(isa), panels = (m + mr - 1) / mr;
  ThreadPool::instance().parallel_ranges(panels, [&](int64_t p0, int64_t p1, int) {
    for (int64_t panel = p0; panel < p1; ++panel)
      pack_a_panel(out, panel, src + panel * mr * row_stride, row_stride, col_stride, 0, k);
  });
}

size_t workspace_bytes(int threads, int64_t kc) {
  return static_cast<size_t>(std::max(threads, 1)) * static_cast<size_t>(thread_scratch_floats(kc)) * sizeof(float);
}

size_t workspace_bytes(int threads, const PackedA& a, int64_t n) {
  const int64_t usable = std::max(1, std::min(ThreadPool::instance().num_threads(), threads));
  return workspace_bytes(threads, a.kc) +
         static_cast<size_t>(shared_b_floats(usable, a.isa, a.m, a.k, n)) * sizeof(float);
}

void sgemm(const PackedA& a, const BSource& b, int64_t n, const Output& y, const Epilogue& epilogue, void* workspace,
           int max_threads) {
  if (a.m == 0 || n == 0) return;
  ThreadPool& pool = ThreadPool::instance();
  const int64_t threads = std::max(1, std::min(pool.num_threads(), max_threads));
  const int64_t mr = tile_rows(a.isa), nr = tile_cols(a.isa);
  // A tall tile's rows go to threads 16 at a time, one run a thread (Job::split_rows_in_runs):
  // in 48-row panels 160 rows made tasks of 48, 48, 48 and 16 rows, 96 against 64 for two
  // threads (112 rows: 96 against 16), and with more panels, tasks of 3 or 4 of them still left
  // one thread a panel behind (a 320 -> 1280 expansion on 7x7 8% faster in halves).
  const int64_t row_unit = is_tall(a.isa) && threads > 1 ? 16 : mr;
  Job job{micro_kernel(a.isa), mr, nr, &a, &b, n, &y, &epilogue, static_cast<float*>(workspace), 1,
          (n + nr - 1) / nr, row_unit, (a.m + row_unit - 1) / row_unit};
  const int64_t shared_floats = reads_b_in_place(a, b) ? 0 : shared_b_floats(threads, a.isa, a.m, a.k, n);
  if (threads > 1) {
    if (split_columns(threads, a.isa, a.m, n)) {
      job.n_tasks = std::min(job.n_panels, 4 * threads);
    } else if (shared_floats > 0) {
      // Every task reads all of the shared B. Tall tiles: one run of 16-row units a thread, each
      // its share, cut where A's panels end (tasks of a few 16-row units made strips of 16 and 32
      // rows, each a pass over B: a 960 -> 160 projection on 7x7 ran 32% slower with four a
      // thread, 3% faster with one); the pool runs a thread's own chunks in order and gives a
      // thread left behind (its core taken) the help of the other from the end of its run.
      if (row_unit < mr) {
        job.split_rows_in_runs(threads);
      } else {
        job.m_parts = std::min(job.m_units, 4 * threads);
      }
    } else if (reads_b_in_place(a, b) && row_unit < mr) {
      // A tall tile on B in place: as on a shared B (all of B read by every task), rows in runs.
      job.split_rows_in_runs(threads);
    } else if (reads_b_in_place(a, b)) {
      // Nothing to pack: one run of rows (output channels) a thread, so the depthwise after an
      // expansion finds its planes in the cache of the core that wrote them (mobilenet_v2 1.7%,
      // efficientnet_b0 1.0% faster at 2 threads than tasks of a row panel and a column panel
      // dealt out in turn, which mixed both halves on both cores); the columns in a few tasks
      // each, the pool's owned ranges keeping a thread to its rows while it keeps up.
      job.m_parts = std::min(job.m_units, threads);
      job.n_tasks = std::min<int64_t>(job.n_panels, ThreadPool::kRangesPerThread);
    } else {
      job.n_tasks = job.n_panels;
      job.m_parts = std::min(job.m_units, (4 * threads + job.n_tasks - 1) / job.n_tasks);
    }
  }
  if (a.k == 0) {
    // No products: the epilogue alone defines Y.
    for (int64_t i = 0; i < a.m; ++i)
      for (int64_t j = 0; j < n; ++j) y.data[i * y.row_stride + j * y.col_stride] = 0.0f;
    for (int64_t i = 0; i < a.m; i += mr)
      for (int64_t j = 0; j < n; j += nr)
        finish_tile(y, epilogue, i, std::min(mr, a.m - i), j, std::min(nr, n - j), false);
    return;
  }
  job.prefetch_b = b.in_place && a.k * n >= kInPlacePrefetchFloats;
  if (shared_floats > 0 && job.m_tasks() > 1) {
    // Placed after the per-thread blocks (workspace_bytes(threads, a, n) sized both).
    float* shared = job.scratch + threads * thread_scratch_floats(a.kc);
    job.shared_b = shared;
    const int64_t k_blocks = (a.k + a.kc - 1) / a.kc;
    pool.parallel_for(k_blocks * job.n_panels, [&](int64_t unit, int) { job.pack_shared(unit); },
                      static_cast<int>(threads));
  }
  pool.parallel_for(job.m_tasks() * job.n_tasks, [&](int64_t task, int thread) { job.run(task, thread); },
                    static_cast<int>(threads));
}

}  // namespace edgert::cpu::gemm

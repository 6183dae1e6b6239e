// The INT8 implicit-GEMM convolution (qconv_imma.h). The product is
// Y[pixel, filter] = sum over r of A[pixel, r] * W[filter, r], r = (ky * KW + kx) * C + c running
// along memory in both the channels-last input and the [M, KH, KW, C] weights, A gathered from X
// on the fly (the zero point outside the image). NCHW tensors (weights [M, C, KH, KW]) take a
// byte-wise gather: the builder stores INT8 activations channels-last on the GPU. A block of 4
// warps computes a tile of Y (64, 32 or 16 pixels by 64 or 32 filters: the tactic's tiling),
// 64 bytes of r at a time, through a pipeline of kStages tiles in shared memory filled by
// asynchronous copies; each warp owns a quarter of the tile, mma.sync m16n8k32 fragments.
#include "qconv_imma.h"

#include <algorithm>
#include <limits>

#include "cuda_op.h"
#include "grid.cuh"
#include "implicit_gemm.cuh"
#include "quantize.cuh"

namespace edgert::cuda {
namespace {

// Tiles of pixels x filters (64, 32 or 16 by 64 or 32: a tactic; smaller tiles give batch 1's
// layers more blocks, and at batch 1 a block's warps wait on latency more than on the tensor
// cores), 64 bytes of the reduction at a time, 4 warps.
constexpr int kTileK = 64, kThreads = 128;
// Tiles in flight: at batch 1 a block has few tiles of work and the SM few blocks, so the
// loads' latency, not the tensor cores, sets the pace; three tiles are loading while one is
// multiplied.
constexpr int kStages = 4;
// Shared rows of 80 bytes (20 words): the 8 rows a fragment read touches start in 8 different
// bank quads, so the 32 lanes hit 32 banks.
constexpr int kRowBytes = kTileK + 16;
constexpr int kMaxSplits = 64;
// Slices that reduce through one thread-block cluster (the portable cluster size; Hopper on).
constexpr int kMaxClusterSlices = 8;
constexpr size_t kMaxWorkspaceBytes = size_t{16} << 20;
constexpr int64_t kEnoughBlocks = 1024;

// The shape in 32-bit integers (launch_qconv refuses larger tensors).
struct Geometry {
  int c, h, w, m, kh, kw, stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w, out_h, out_w;
  int pixels, reduction, slice;  // slice: bytes of r per split, a multiple of kTileK
};


// Where element r of a window lies: channel c, tap row ky and column kx. Channels-last: r =
// (ky * KW + kx) * C + c; NCHW (weights [M, C, KH, KW]): r = (c * KH + ky) * KW + kx.
struct WindowPosition {
  int c, ky, kx;
};

template <bool kNhwc>
__device__ __forceinline__ WindowPosition window_position(const Geometry& g, int r) {
  int c, tap;
  if (kNhwc) {
    tap = r / g.c;
    c = r - tap * g.c;
  } else {
    c = r / (g.kh * g.kw);
    tap = r - c * (g.kh * g.kw);
  }
  const int ky = tap / g.kw;
  return {c, ky, tap - ky * g.kw};
}

// 16 bytes of A from r on, byte by byte (the stem's 3 channels, NCHW tensors: layouts where a
// 16-byte chunk may straddle taps), the window position found once and stepped along r. Past
// the slice: zeros (their weights are 0).
template <bool kNhwc>
__device__ __forceinline__ uint4 gather_bytes(const uint8_t* __restrict__ x, const Geometry& g, const PixelOrigin& o,
                                              int r, int r_end, uint32_t pad_word) {
  if (!o.valid || r >= r_end) return make_uint4(0, 0, 0, 0);
  const WindowPosition at = window_position<kNhwc>(g, r);
  int c = at.c, ky = at.ky, kx = at.kx;
  uint32_t words[4] = {0, 0, 0, 0};
#pragma unroll
  for (int j = 0; j < 16; ++j) {  // unrolled: the loads are in flight together
    if (r + j < r_end) {
      const int iy = o.iy + ky * g.dilation_h, ix = o.ix + kx * g.dilation_w;
      uint32_t byte = pad_word & 0xffu;
      if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
        byte = x[kNhwc ? o.image + (iy * g.w + ix) * g.c + c : o.image + (c * g.h + iy) * g.w + ix];
      words[j / 4] |= byte << (8 * (j % 4));
    }
    // The next r: channels fastest, then kx, then ky (channels-last); kx, ky, then c (NCHW).
    if (kNhwc) {
      if (++c == g.c) {
        c = 0;
        if (++kx == g.kw) kx = 0, ++ky;
      }
    } else if (++kx == g.kw) {
      kx = 0;
      if (++ky == g.kh) ky = 0, ++c;
    }
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

template <bool kVector>
__device__ __forceinline__ uint4 load_w(const int8_t* __restrict__ w, const Geometry& g, int filter, int r, int r_end) {
  if (filter >= g.m || r >= r_end) return make_uint4(0, 0, 0, 0);
  const int8_t* row = w + static_cast<int64_t>(filter) * g.reduction;
  if (kVector) return *reinterpret_cast<const uint4*>(row + r);
  uint32_t words[4] = {0, 0, 0, 0};
#pragma unroll
  for (int j = 0; j < 16; ++j)
    if (r + j < r_end) words[j / 4] |= static_cast<uint32_t>(static_cast<uint8_t>(row[r + j])) << (8 * (j % 4));
  return make_uint4(words[0], words[1], words[2], words[3]);
}

__device__ __forceinline__ int byte_sum(const uint4& v, int sum) {
  constexpr int kOnes = 0x01010101;
  sum = __dp4a(static_cast<int>(v.x), kOnes, sum);
  sum = __dp4a(static_cast<int>(v.y), kOnes, sum);
  sum = __dp4a(static_cast<int>(v.z), kOnes, sum);
  return __dp4a(static_cast<int>(v.w), kOnes, sum);
}

// Where output (pixel, filter) lies in Y.
template <bool kNhwc>
__device__ __forceinline__ int64_t output_index(const Geometry& g, int pixel, int filter) {
  if (kNhwc) return static_cast<int64_t>(pixel) * g.m + filter;
  const int plane = g.out_h * g.out_w, n = pixel / plane;
  return (static_cast<int64_t>(n) * g.m + filter) * plane + (pixel - n * plane);
}

// 16 bytes global -> shared without passing through registers (zeros when !valid).
__device__ __forceinline__ void copy16(void* shared, const void* global, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Thread-block clusters (sm_90) in PTX (cooperative_groups' headers need libcu++, which the
// boards' cross toolchains lack): the cluster's barrier (release / acquire: what a block wrote
// to its shared memory before it is visible to the others after), this block's rank and the
// cluster's size, and a 32-bit load from another block's shared memory.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ unsigned cluster_blocks() {
  unsigned blocks;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(blocks));
  return blocks;
}
__device__ __forceinline__ int load_from_block(const int* shared, unsigned rank) {
  const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  unsigned remote;
  int value;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
  asm volatile("ld.shared::cluster.u32 %0, [%1];\n" : "=r"(value) : "r"(remote) : "memory");
  return value;
}
#endif

__device__ __forceinline__ uint32_t shared_word(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// d += a (16x32 uint8, row-major) * b (32x8 int8, column-major), int32.
__device__ __forceinline__ void mma_u8s8(int (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // supports() keeps the op off GPUs without integer mma (before sm_80)
#endif
}

// One filter's requantisation: bias and multiplier, loaded once per thread and filter (before
// the main loop, so their latency hides behind it; read per element, behind stores to Y that may
// alias them, they would cost a dependent load each).
struct FilterRequant {
  int bias = 0;
  float multiplier = 0.f;
};

__device__ __forceinline__ FilterRequant filter_requant(int filter, const Geometry& g, const QConvQuantization& q) {
  FilterRequant r;
  if (filter >= g.m) return r;
  if (q.bias) r.bias = __ldg(q.bias + filter);
  r.multiplier = __ldg(q.multiplier + filter);
  return r;
}

// QLinearConv's requantisation, as the CPU reference computes it: float(sum + bias) *
// multiplier, round half to even, plus the zero point, saturated to [0, 255].
__device__ __forceinline__ uint8_t requantize(int sum, const FilterRequant& r, int y_zero_point) {
  return saturate_u8(__fmul_rn(__int2float_rn(sum + r.bias), r.multiplier), y_zero_point);
}

// Output element `at`: requantised, then with the fused residual add (QLinearAdd's arithmetic on
// the convolution's bytes and the residual's: two float products, their sum, rounding).
__device__ __forceinline__ uint8_t finish(int sum, const FilterRequant& r, const QConvQuantization& q, int64_t at) {
  const uint8_t conv = requantize(sum, r, q.y_zero_point);
  if (!q.add.residual) return conv;
  const float v = __fadd_rn(
      __fmul_rn(static_cast<float>(static_cast<int32_t>(conv) - q.y_zero_point), q.add.conv_ratio),
      __fmul_rn(static_cast<float>(static_cast<int32_t>(q.add.residual[at]) - q.add.residual_zero), q.add.residual_ratio));
  return saturate_u8(v, q.add.sum_zero);
}

template <int kTileP, int kTileF, bool kVector, bool kNhwc, bool kCluster>
__global__ void __launch_bounds__(kThreads)
    qconv_imma(const uint8_t* __restrict__ x, const int8_t* __restrict__ w, uint8_t* __restrict__ y,
               int32_t* __restrict__ partial, Geometry g, QConvQuantization q) {
  __shared__ __align__(16) uint8_t a_tile[kStages][kTileP * kRowBytes];
  __shared__ __align__(16) uint8_t w_tile[kStages][kTileF * kRowBytes];
  __shared__ int filter_sums[kTileF];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int group = lane >> 2, quad = lane & 3;  // the mma fragments' row group and lane in it
  // 2 x 2 warps (1 x 4 for 16-pixel tiles), each kMt x kNt fragments (m16 x n8).
  constexpr int kWarpsP = kTileP >= 32 ? 2 : 1, kWarpsF = 4 / kWarpsP;
  constexpr int kMt = kTileP / (16 * kWarpsP), kNt = kTileF / (8 * kWarpsF);
  constexpr int kRowsA = (kTileP + 31) / 32, kRowsW = kTileF / 32;  // staged rows per thread
  const int warp_p = (warp / kWarpsF) * (kTileP / kWarpsP), warp_f = (warp % kWarpsF) * (kTileF / kWarpsF);
  const int pixel0 = blockIdx.x * kTileP, filter0 = blockIdx.y * kTileF;
  const int r_begin = blockIdx.z * g.slice, r_end = min(g.reduction, r_begin + g.slice);
  const uint32_t pad_word = 0x01010101u * static_cast<uint32_t>(q.x_zero_point);
  const bool zero_point = q.x_zero_point != 0;

  // Staging: this thread fills rows `row` (+ 32) of both tiles, bytes [chunk, chunk + 16).
  const int row = tid >> 2, chunk = (tid & 3) * 16;
  PixelOrigin origins[kRowsA];
#pragma unroll
  for (int i = 0; i < kRowsA; ++i) origins[i] = origin_of(g, pixel0 + row + 32 * i);
  // Tile t of the slice into stage s: 16-byte asynchronous copies (zero-filled past the slice or
  // the tensors), the zero point written where a window leaves the image; byte-wise gathers
  // stored directly.
  //
  // Where this thread's chunk of tile `next_tile` lies in the window (channels-last): channel,
  // kx, ky, stepped by kTileK per tile instead of divided out (tiles are issued in order).
  int next_tile = 0, chunk_c = 0, chunk_kx = 0, chunk_ky = 0;
  if (kVector) {
    const WindowPosition at = window_position<true>(g, r_begin + chunk);
    chunk_c = at.c;
    chunk_ky = at.ky;
    chunk_kx = at.kx;
  }
  auto issue = [&](int t, int s) {
    const int r = r_begin + t * kTileK + chunk;
    if (kVector) {
      for (; next_tile < t; ++next_tile)
        for (chunk_c += kTileK; chunk_c >= g.c;) {
          chunk_c -= g.c;
          if (++chunk_kx == g.kw) chunk_kx = 0, ++chunk_ky;
        }
    }
#pragma unroll
    for (int i = 0; i < kRowsA; ++i) {
      if (row + 32 * i >= kTileP) break;  // 16-pixel tiles: half the threads stage A
      uint8_t* a_dst = &a_tile[s][(row + 32 * i) * kRowBytes + chunk];
      if (kVector) {
        int at = -2;  // past the slice or the pixels: zeros
        if (origins[i].valid && r < r_end) {
          const int iy = origins[i].iy + chunk_ky * g.dilation_h, ix = origins[i].ix + chunk_kx * g.dilation_w;
          at = iy < 0 || iy >= g.h || ix < 0 || ix >= g.w ? -1 : origins[i].image + (iy * g.w + ix) * g.c + chunk_c;
        }
        if (at == -1)
          *reinterpret_cast<uint4*>(a_dst) = make_uint4(pad_word, pad_word, pad_word, pad_word);
        else
          copy16(a_dst, at >= 0 ? x + at : x, at >= 0);
      } else {
        *reinterpret_cast<uint4*>(a_dst) = gather_bytes<kNhwc>(x, g, origins[i], r, r_end, pad_word);
      }
    }
#pragma unroll
    for (int i = 0; i < kRowsW; ++i) {
      uint8_t* w_dst = &w_tile[s][(row + 32 * i) * kRowBytes + chunk];
      const int filter = filter0 + row + 32 * i;
      if (kVector) {
        const bool in_w = filter < g.m && r < r_end;
        copy16(w_dst, in_w ? w + static_cast<int64_t>(filter) * g.reduction + r : w, in_w);
      } else {
        *reinterpret_cast<uint4*>(w_dst) = load_w<false>(w, g, filter, r, r_end);
      }
    }
  };

  // The requantisation of the filters this thread's accumulators hold (4 x 2 of them), or in the
  // cluster's reduction the one filter it adds up (column tid % kTileF of the tile).
  FilterRequant requant[kNt][2];
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      requant[nt][j] = kCluster ? FilterRequant() : filter_requant(filter0 + warp_f + nt * 8 + quad * 2 + j, g, q);
  const FilterRequant reduced = kCluster ? filter_requant(filter0 + tid % kTileF, g, q) : FilterRequant();

  int acc[kMt][kNt][4] = {};
  int weight_sums[kRowsW] = {};  // of the filters this thread stages, over its chunks
  const int tiles = r_begin < r_end ? (r_end - r_begin + kTileK - 1) / kTileK : 0;
  if (kVector) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < tiles) issue(s, s);
      copy_commit();  // empty groups too: the wait below counts groups
    }
  } else {
    // Byte gathers go through registers: load the first tiles together, then store them, so
    // their latencies overlap (short reductions, the stem's 147 bytes, are all here).
    uint4 a_regs[kStages - 1][kRowsA], w_regs[kStages - 1][kRowsW];
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      const int r = r_begin + s * kTileK + chunk;
#pragma unroll
      for (int i = 0; i < kRowsA; ++i)
        a_regs[s][i] = s < tiles && row + 32 * i < kTileP
                           ? gather_bytes<kNhwc>(x, g, origins[i], r, r_end, pad_word) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < kRowsW; ++i)
        w_regs[s][i] = s < tiles ? load_w<false>(w, g, filter0 + row + 32 * i, r, r_end) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s >= tiles) break;
#pragma unroll
      for (int i = 0; i < kRowsA; ++i)
        if (row + 32 * i < kTileP) *reinterpret_cast<uint4*>(&a_tile[s][(row + 32 * i) * kRowBytes + chunk]) = a_regs[s][i];
#pragma unroll
      for (int i = 0; i < kRowsW; ++i)
        *reinterpret_cast<uint4*>(&w_tile[s][(row + 32 * i) * kRowBytes + chunk]) = w_regs[s][i];
    }
  }
  for (int t = 0; t < tiles; ++t) {
    copy_wait<kStages - 2>();  // this thread's copies of tile t landed
    __syncthreads();           // everyone's; and tile t - 1's stage is free again
    if (t + kStages - 1 < tiles) issue(t + kStages - 1, (t + kStages - 1) % kStages);
    copy_commit();
    const uint8_t* at = a_tile[t % kStages];
    const uint8_t* wt = w_tile[t % kStages];
    if (zero_point)
#pragma unroll
      for (int i = 0; i < kRowsW; ++i)
        weight_sums[i] = byte_sum(*reinterpret_cast<const uint4*>(wt + (row + 32 * i) * kRowBytes + chunk), weight_sums[i]);
#pragma unroll
    for (int k = 0; k < kTileK; k += 32) {
      uint32_t af[kMt][4], bf[kNt][2];
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const uint8_t* p = at + (warp_p + mt * 16 + group) * kRowBytes + k + quad * 4;
        af[mt][0] = shared_word(p);
        af[mt][1] = shared_word(p + 8 * kRowBytes);
        af[mt][2] = shared_word(p + 16);
        af[mt][3] = shared_word(p + 8 * kRowBytes + 16);
      }
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        const uint8_t* p = wt + (warp_f + nt * 8 + group) * kRowBytes + k + quad * 4;
        bf[nt][0] = shared_word(p);
        bf[nt][1] = shared_word(p + 16);
      }
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNt; ++nt) mma_u8s8(acc[mt][nt], af[mt], bf[nt]);
    }
  }

  // sum((x - zx) w) = sum(x w) - zx sum(w): each filter's weight sum over this slice, from the
  // four lanes that staged its row.
  if (zero_point) {
#pragma unroll
    for (int i = 0; i < kRowsW; ++i) {
      int s = weight_sums[i];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      if ((tid & 3) == 0) filter_sums[row + 32 * i] = s;
    }
    __syncthreads();
  }

  // Accumulator element e of (mt, nt): row group (+8 for e >= 2), column 2 * quad + (e & 1).
  auto for_each_sum = [&](auto&& body) {
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int local_pixel = warp_p + mt * 16 + group + (e >= 2 ? 8 : 0);
          const int local_filter = warp_f + nt * 8 + quad * 2 + (e & 1);
          int v = acc[mt][nt][e];
          if (zero_point) v -= q.x_zero_point * filter_sums[local_filter];
          body(local_pixel, local_filter, v, requant[nt][e & 1]);
        }
  };

  if (kCluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // The slices of one tile are the blocks of one cluster: each leaves its sums in its own
    // shared memory, then block `rank` adds up rows [rank * rows, (rank + 1) * rows) of the
    // tile from all of them (integer sums: exact in any order) and requantises.
    __syncthreads();  // the pipeline's tiles are read; their memory holds the sums now
    int* sums = reinterpret_cast<int*>(&a_tile[0][0]);
    for_each_sum([&](int lp, int lf, int v, const FilterRequant&) { sums[lp * kTileF + lf] = v; });
    cluster_sync();
    const int slices = static_cast<int>(cluster_blocks()), rank = static_cast<int>(cluster_rank());
    const int rows = kTileP / slices;
    for (int i = tid; i < rows * kTileF; i += kThreads) {
      const int lp = rank * rows + i / kTileF, lf = i % kTileF;
      const int pixel = pixel0 + lp, filter = filter0 + lf;
      int v = 0;
      for (int s = 0; s < slices; ++s) v += load_from_block(sums + lp * kTileF + lf, static_cast<unsigned>(s));
      // i % kTileF == tid % kTileF: this thread's filter throughout
      if (pixel < g.pixels && filter < g.m) {
        const int64_t at = output_index<kNhwc>(g, pixel, filter);
        y[at] = finish(v, reduced, q, at);
      }
    }
    cluster_sync();  // no block leaves while another reads its shared memory
#else
    __trap();  // the host launches clusters on sm_90 and later only
#endif
    return;
  }
  for_each_sum([&](int lp, int lf, int v, const FilterRequant& r) {
    const int pixel = pixel0 + lp, filter = filter0 + lf;
    if (pixel >= g.pixels || filter >= g.m) return;
    if (partial)
      partial[(static_cast<int64_t>(blockIdx.z) * g.pixels + pixel) * g.m + filter] = v;
    else
      y[output_index<kNhwc>(g, pixel, filter)] = finish(v, r, q, output_index<kNhwc>(g, pixel, filter));
  });
}

// Adds the slices' partial sums ([pixel, filter]) in slice order, then requantises.
template <bool kNhwc>
__global__ void qconv_sum(const int32_t* __restrict__ partial, int splits, uint8_t* __restrict__ y, Geometry g,
                          QConvQuantization q) {
  const int64_t total = static_cast<int64_t>(g.pixels) * g.m;
  grid_stride(total, [&](auto i) {
    int v = 0;
    for (int s = 0; s < splits; ++s) v += partial[s * total + i];
    const int pixel = static_cast<int>(i / static_cast<decltype(i)>(g.m));
    const int filter = static_cast<int>(i - static_cast<decltype(i)>(pixel) * g.m);
    const int64_t at = output_index<kNhwc>(g, pixel, filter);
    y[at] = finish(v, filter_requant(filter, g, q), q, at);
  });
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t blocks_of(const QConvShape& s, QConvTiling t) {
  return ceil_div(s.n * s.out_h * s.out_w, t.pixels) * ceil_div(s.m, t.filters);
}

template <int kTileP, int kTileF>
auto kernel_for(bool nhwc, bool vector, bool cluster) {
  return !nhwc    ? (cluster ? qconv_imma<kTileP, kTileF, false, false, true> : qconv_imma<kTileP, kTileF, false, false, false>)
         : vector ? (cluster ? qconv_imma<kTileP, kTileF, true, true, true> : qconv_imma<kTileP, kTileF, true, true, false>)
                  : (cluster ? qconv_imma<kTileP, kTileF, false, true, true> : qconv_imma<kTileP, kTileF, false, true, false>);
}

int64_t reduction_of(const QConvShape& s) { return s.c * s.kh * s.kw; }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

const std::vector<QConvTiling>& qconv_tilings() {
  static const std::vector<QConvTiling> tilings = {{64, 64}, {64, 32}, {32, 64}, {32, 32}, {16, 64}, {16, 32}};
  return tilings;
}

std::vector<int> qconv_splits(const QConvShape& s, QConvTiling t) {
  std::vector<int> splits = {1};
  const int64_t tiles_r = ceil_div(reduction_of(s), kTileK), blocks = blocks_of(s, t);
  for (int split = 2; split <= kMaxSplits; split *= 2) {
    if (tiles_r < 2 * split || blocks * (split / 2) >= kEnoughBlocks) break;
    if (qconv_workspace_bytes(s, split) > kMaxWorkspaceBytes) break;
    splits.push_back(split);
  }
  return splits;
}

bool qconv_cluster_reduction(int splits) {
  static const int major = [] {
    int device = 0, value = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
      return 0;
    return value;
  }();
  return major >= 9 && splits <= kMaxClusterSlices;
}

size_t qconv_workspace_bytes(const QConvShape& s, int splits) {
  if (splits <= 1 || qconv_cluster_reduction(splits)) return 0;
  return static_cast<size_t>(splits) * static_cast<size_t>(s.n * s.out_h * s.out_w * s.m) * sizeof(int32_t);
}

void launch_qconv(const uint8_t* x, const int8_t* w, uint8_t* y, const QConvShape& s, const QConvQuantization& q,
                  QConvTiling tiling, int splits, void* workspace, cudaStream_t stream) {
  const int64_t limit = std::numeric_limits<int32_t>::max();
  if (s.n * s.c * s.h * s.w > limit || s.n * s.m * s.out_h * s.out_w > limit || s.m * reduction_of(s) > limit ||
      static_cast<int64_t>(std::max(splits, 1)) * s.n * s.out_h * s.out_w * s.m > limit)
    fail(EDGERT_ERR_UNSUPPORTED, "INT8 convolution of tensors with 2^31 elements or more");
  if (splits < 1 || splits > kMaxSplits) fail(EDGERT_ERR_INVALID_ARGUMENT, "%d reduction slices", splits);
  if ((tiling.pixels != 64 && tiling.pixels != 32 && tiling.pixels != 16) ||
      (tiling.filters != 64 && tiling.filters != 32))
    fail(EDGERT_ERR_INVALID_ARGUMENT, "tile %dx%d (64, 32 or 16 pixels; 64 or 32 filters)", tiling.pixels,
         tiling.filters);
  if (s.n * s.out_h * s.out_w == 0 || s.m == 0) return;
  auto i = [](int64_t v) { return static_cast<int>(v); };
  Geometry g{i(s.c), i(s.h), i(s.w), i(s.m), i(s.kh), i(s.kw), i(s.stride_h), i(s.stride_w), i(s.pad_top),
             i(s.pad_left), i(s.dilation_h), i(s.dilation_w), i(s.out_h), i(s.out_w), i(s.n * s.out_h * s.out_w),
             i(reduction_of(s)), 0};
  g.slice = i(ceil_div(ceil_div(g.reduction, kTileK), splits) * kTileK);
  const dim3 grid(static_cast<unsigned>(ceil_div(g.pixels, tiling.pixels)),
                  static_cast<unsigned>(ceil_div(g.m, tiling.filters)), static_cast<unsigned>(splits));
  const bool cluster = splits > 1 && qconv_cluster_reduction(splits);
  int32_t* partial = splits > 1 && !cluster ? static_cast<int32_t*>(workspace) : nullptr;
  // One 16-byte load per chunk needs channels-last chunks that never straddle a tap, and
  // aligned tensors.
  const bool vector = s.channels_last && s.c % 16 == 0 && aligned16(x) && aligned16(w);
  const bool nhwc = s.channels_last;
  const bool wide = tiling.filters == 64;
  auto kernel = tiling.pixels == 64 ? (wide ? kernel_for<64, 64>(nhwc, vector, cluster) : kernel_for<64, 32>(nhwc, vector, cluster))
                : tiling.pixels == 32 ? (wide ? kernel_for<32, 64>(nhwc, vector, cluster) : kernel_for<32, 32>(nhwc, vector, cluster))
                                      : (wide ? kernel_for<16, 64>(nhwc, vector, cluster) : kernel_for<16, 32>(nhwc, vector, cluster));
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  if (cluster) {
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = 1;
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = static_cast<unsigned>(splits);
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  check_cuda(cudaLaunchKernelEx(&config, kernel, x, w, y, partial, g, q), "qconv_imma launch");
  check_launch("qconv_imma");
  if (!partial) return;
  const int64_t total = static_cast<int64_t>(g.pixels) * g.m;
  if (s.channels_last)
    qconv_sum<true><<<blocks_for(total, 256), 256, 0, stream>>>(partial, splits, y, g, q);
  else
    qconv_sum<false><<<blocks_for(total, 256), 256, 0, stream>>>(partial, splits, y, g, q);
  check_launch("qconv_sum");
}

}  // namespace edgert::cuda

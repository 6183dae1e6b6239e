// TopK on the GPU: the k largest (or smallest) elements along an axis and their int64 indices,
// float32 and float16. K is input 1 (opset 10 on), read on the host, or the attribute k before.
// Results are bitwise the CPU reference's (plugins/cpu/topk.cpp): equal values keep the smaller
// index first, a NaN ranks above every number (first when largest, last when smallest, ties
// among NaNs again by index), +0 and -0 are equal, and the values are copied from the input.
// sorted=0 gets them sorted too, which ONNX allows.
//
// Every element becomes one 64-bit key whose unsigned order is that ranking: the value's bits
// made monotonic (NaN on top, -0 as +0, inverted for smallest) above the inverted index. Keys
// are unique, so whatever selects the k largest keys returns the same elements in the same
// order. Key 0 ranks below every element's and pads partial sorts. Rows are outer x inner
// walks of n elements, `inner` apart; the layout is row-major (under layout NHWC the values
// would be channels-last and the indices not, so the kernel refuses NHWC and the builder
// reformats its input). One of four methods, chosen in prepare:
//   per thread  k <= kThreadKeep on rows of up to kShortRow, or on strided rows (inner > 1)
//               when there are many (kManyRows): one thread per row keeps its best keys sorted
//               in registers; neighbouring threads read neighbouring columns, so strided rows
//               read coalesced (the top k classes of each pixel of [N, C, H, W] along C);
//   select      k <= kThreadKeep on other rows of up to kSelectRow (a classifier's top 5 of
//               1000 logits): a block per row holds the row's keys in registers and takes the
//               block's largest key k times, its owner dropping it after each pass;
//   chunk sort  any k on rows of up to kChunk, or k <= kChunk / 2 on longer rows: a block
//               bitonic-sorts a chunk of kChunk keys in shared memory and keeps its best k; a
//               long row's chunks write their best k to the workspace and further passes sort
//               those candidates until one chunk is left (each pass at least halves them),
//               whose best k are the outputs;
//   row sort    k > kChunk / 2 on longer rows, where chunks would not shrink the candidates: a
//               block bitonic-sorts the whole row's keys in the workspace (global memory).
//               Slower, and rare: a simple method that is right for any k.
#include <algorithm>
#include <string>
#include <vector>

#include "activation.cuh"
#include "cuda_op.h"
#include "edgert/dtype_info.h"
#include "grid.cuh"

namespace edgert::cuda {
namespace {

constexpr int kThreadKeep = 16;
constexpr int64_t kShortRow = 64;
constexpr int64_t kManyRows = 2048;
constexpr unsigned kSelectThreads = 256;
constexpr int kSelectKeysPerThread = 16;
constexpr int64_t kSelectRow = kSelectThreads * kSelectKeysPerThread;
constexpr int64_t kChunk = 4096;  // 32 KiB of keys in shared memory
constexpr unsigned kSortThreads = 512;
constexpr unsigned kRowSortThreads = 1024;
// The key keeps 32 bits of index, and key 0 is no element's.
constexpr int64_t kMaxAxis = 0xffffffffLL;

struct TopKRows {
  int64_t rows = 0, n = 0, inner = 1, k = 0;  // rows = outer * inner
  bool largest = true;
};

__device__ __forceinline__ uint64_t key_of(float v, int64_t index, bool largest) {
  uint32_t bits = 0xffffffffu;  // NaN: above +inf (0xff800000 below)
  if (!isnan(v)) {
    const uint32_t u = __float_as_uint(v == 0.f ? 0.f : v);
    bits = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
  if (!largest) bits = ~bits;
  return (static_cast<uint64_t>(bits) << 32) | (0xffffffffu - static_cast<uint32_t>(index));
}

__device__ __forceinline__ int64_t index_of(uint64_t key) {
  return static_cast<int64_t>(0xffffffffu - static_cast<uint32_t>(key));
}

// The element row r starts at, and where its j-th result goes: [outer, k, inner].
__device__ __forceinline__ int64_t row_start(const TopKRows& g, int64_t r) {
  return (r / g.inner) * g.n * g.inner + r % g.inner;
}
__device__ __forceinline__ int64_t result_at(const TopKRows& g, int64_t r, int64_t j) {
  return ((r / g.inner) * g.k + j) * g.inner + r % g.inner;
}

template <typename T>
__device__ __forceinline__ void write_result(const T* x, const TopKRows& g, int64_t r, int64_t j, uint64_t key,
                                             T* values, int64_t* indices) {
  const int64_t index = index_of(key);
  values[result_at(g, r, j)] = x[row_start(g, r) + index * g.inner];
  indices[result_at(g, r, j)] = index;
}

template <typename T, int kKeep>
__global__ void topk_per_thread(const T* __restrict__ x, T* __restrict__ values, int64_t* __restrict__ indices,
                                TopKRows g) {
  grid_stride(g.rows, [&](auto r) {
    const T* row = x + row_start(g, r);
    uint64_t best[kKeep];  // descending; fully unrolled loops keep it in registers
#pragma unroll
    for (int s = 0; s < kKeep; ++s) best[s] = 0;
    for (int64_t j = 0; j < g.n; ++j) {
      uint64_t key = key_of(to_float(row[j * g.inner]), j, g.largest);
      if (key <= best[kKeep - 1]) continue;
#pragma unroll
      for (int s = 0; s < kKeep; ++s)
        if (key > best[s]) {  // insert, pushing the smaller ones down
          const uint64_t displaced = best[s];
          best[s] = key;
          key = displaced;
        }
    }
#pragma unroll
    for (int s = 0; s < kKeep; ++s)
      if (s < g.k) write_result(x, g, r, s, best[s], values, indices);
  });
}

__device__ __forceinline__ uint64_t warp_max(uint64_t v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const uint64_t other = __shfl_xor_sync(0xffffffffu, static_cast<unsigned long long>(v), offset);
    v = other > v ? other : v;
  }
  return v;
}

// One block of kSelectThreads per row of up to kSelectRow elements; k passes of a block-wide
// maximum over the keys the threads hold (keys are unique: the owner recognises its own).
template <typename T>
__global__ void __launch_bounds__(kSelectThreads)
    topk_select(const T* __restrict__ x, TopKRows g, T* __restrict__ values, int64_t* __restrict__ indices) {
  __shared__ uint64_t partial[kSelectThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t r = blockIdx.x; r < g.rows; r += gridDim.x) {
    const T* row = x + row_start(g, r);
    uint64_t mine[kSelectKeysPerThread];
#pragma unroll
    for (int s = 0; s < kSelectKeysPerThread; ++s) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(s) * kSelectThreads;
      mine[s] = j < g.n ? key_of(to_float(row[j * g.inner]), j, g.largest) : 0;
    }
    for (int64_t taken = 0; taken < g.k; ++taken) {
      uint64_t best = 0;
#pragma unroll
      for (int s = 0; s < kSelectKeysPerThread; ++s) best = mine[s] > best ? mine[s] : best;
      best = warp_max(best);
      __syncthreads();  // the previous pass's partials have been read
      if (lane == 0) partial[warp] = best;
      __syncthreads();
      best = warp_max(lane < static_cast<int>(kSelectThreads / 32) ? partial[lane] : 0);
#pragma unroll
      for (int s = 0; s < kSelectKeysPerThread; ++s)
        if (mine[s] == best) mine[s] = 0;
      if (threadIdx.x == 0) write_result(x, g, r, taken, best, values, indices);
    }
  }
}

// Sorts keys[0, size) descending (size a power of two) with the block's threads; every thread
// must call it, and sees the sorted keys on return.
template <typename I>
__device__ void sort_descending(uint64_t* keys, I size) {
  for (I span = 2; span <= size; span *= 2) {
    for (I stride = span / 2; stride > 0; stride /= 2) {
      for (I c = threadIdx.x; c < size / 2; c += blockDim.x) {
        const I lo = 2 * c - (c & (stride - 1)), hi = lo + stride;
        const bool descending = (lo & span) == 0;  // the direction of lo's bitonic run
        const uint64_t a = keys[lo], b = keys[hi];
        if ((a < b) == descending) {
          keys[lo] = b;
          keys[hi] = a;
        }
      }
      __syncthreads();
    }
  }
}

// One block per chunk of kChunk keys (`sorted`, a power of two, at least the chunk's length):
// from row r of x (candidates null) or candidates[r * count, (r + 1) * count). Writes the best
// k to next[(r * chunks + chunk) * k, ...), or, when next is null (one chunk), the results.
template <typename T>
__global__ void __launch_bounds__(kSortThreads)
    topk_sort_chunks(const T* __restrict__ x, const uint64_t* __restrict__ candidates, int64_t count, int64_t chunks,
                     int sorted, TopKRows g, uint64_t* __restrict__ next, T* __restrict__ values,
                     int64_t* __restrict__ indices) {
  extern __shared__ uint64_t keys[];
  for (int64_t b = blockIdx.x; b < g.rows * chunks; b += gridDim.x) {
    const int64_t r = b / chunks, first = (b % chunks) * kChunk;
    const int64_t length = count - first < kChunk ? count - first : kChunk;
    const T* row = x + row_start(g, r);
    __syncthreads();  // the previous chunk's keys have been read
    for (int t = threadIdx.x; t < sorted; t += blockDim.x) {
      const int64_t j = first + t;
      uint64_t key = 0;
      if (t < length) key = candidates ? candidates[r * count + j] : key_of(to_float(row[j * g.inner]), j, g.largest);
      keys[t] = key;
    }
    __syncthreads();
    sort_descending(keys, sorted);
    for (int64_t j = threadIdx.x; j < g.k; j += blockDim.x) {
      if (next) next[b * g.k + j] = keys[j];
      else write_result(x, g, r, j, keys[j], values, indices);
    }
  }
}

// One block per row, its keys in workspace[r * sorted, (r + 1) * sorted).
template <typename T>
__global__ void __launch_bounds__(kRowSortThreads)
    topk_sort_rows(const T* __restrict__ x, uint64_t* keys, int64_t sorted, TopKRows g, T* __restrict__ values,
                   int64_t* __restrict__ indices) {
  for (int64_t r = blockIdx.x; r < g.rows; r += gridDim.x) {
    const T* row = x + row_start(g, r);
    uint64_t* row_keys = keys + r * sorted;
    for (int64_t t = threadIdx.x; t < sorted; t += blockDim.x)
      row_keys[t] = t < g.n ? key_of(to_float(row[t * g.inner]), t, g.largest) : 0;
    __syncthreads();
    sort_descending(row_keys, sorted);
    for (int64_t j = threadIdx.x; j < g.k; j += blockDim.x) write_result(x, g, r, j, row_keys[j], values, indices);
  }
}

int64_t power_of_two_at_least(int64_t n) {
  int64_t p = 2;
  while (p < n) p *= 2;
  return p;
}

int32_t topk_supports(const edgert_node* node, const edgert_tensor* in) {
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[0].dtype)) return 0;
  if (in[0].rank > EDGERT_MAX_RANK || node->num_outputs != 2) return 0;
  return !channels_last(*node);
}

class TopKOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const Attributes attrs(&node);
    if (!is_float(in[0].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "X is %s; the GPU kernel takes float32 and float16", edgert_dtype_name(in[0].dtype));
    if (channels_last(node)) fail(EDGERT_ERR_UNSUPPORTED, "layout NHWC (the GPU kernel reads row-major tensors)");
    dtype_ = in[0].dtype;
    int64_t k = 0;
    if (node.opset < 10) {
      k = attrs.get_int("k", -1);
    } else {
      if (node.num_inputs < 2 || !is_present(in[1])) fail(EDGERT_ERR_INVALID_ARGUMENT, "input K is required");
      info.data_dependent = 1;  // the output shape follows the value of K
      const std::vector<int64_t> values = read_ints(in[1], "K");
      if (values.size() != 1) fail(EDGERT_ERR_SHAPE, "K must hold one value, it holds %zu", values.size());
      k = values[0];
    }
    if (in[0].rank == 0) fail(EDGERT_ERR_SHAPE, "X must have rank >= 1");
    const int64_t axis = normalize_axis(attrs.get_int("axis", -1), in[0].rank);
    TopKRows g;
    g.largest = attrs.get_int("largest", 1) != 0;
    int64_t outer = 1;
    for (int64_t a = 0; a < in[0].rank; ++a) {
      if (a < axis) outer *= in[0].dims[a];
      else if (a > axis) g.inner *= in[0].dims[a];
    }
    g.n = in[0].dims[axis];
    if (k < 0 || k > g.n)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "k = %lld must be in [0, %lld] (the size of axis %lld)", static_cast<long long>(k),
           static_cast<long long>(g.n), static_cast<long long>(axis));
    if (g.n >= kMaxAxis)
      fail(EDGERT_ERR_UNSUPPORTED, "axis %lld has %lld elements; the GPU kernel takes fewer than %lld",
           static_cast<long long>(axis), static_cast<long long>(g.n), static_cast<long long>(kMaxAxis));
    g.k = k;
    g.rows = outer * g.inner;
    rows_ = g;
    Shape shape = shape_of(in[0]);
    shape[static_cast<size_t>(axis)] = k;
    set_output(out[0], dtype_, shape);
    set_output(out[1], EDGERT_DTYPE_INT64, shape);
    plan(info);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace,
               cudaStream_t stream) override {
    if (rows_.rows == 0 || rows_.k == 0) return;
    if (dtype_ == EDGERT_DTYPE_FLOAT16) run<__half>(in[0].data, out, workspace, stream);
    else run<float>(in[0].data, out, workspace, stream);
  }

 private:
  enum class Method { PerThread, Select, ChunkSort, RowSort };

  // The method, the chunk passes' candidate counts and the workspace.
  void plan(edgert_prepare_info& info) {
    const TopKRows& g = rows_;
    counts_.clear();
    buffer_keys_[0] = buffer_keys_[1] = 0;
    if (g.k <= kThreadKeep && (g.n <= kShortRow || (g.inner > 1 && g.rows >= kManyRows))) {
      method_ = Method::PerThread;
    } else if (g.k <= kThreadKeep && g.n <= kSelectRow) {
      method_ = Method::Select;
    } else if (g.n <= kChunk || g.k <= kChunk / 2) {
      // Pass p sorts counts_[p] keys a row; every pass but the last writes its chunks' best k to
      // buffer p % 2 for the next.
      method_ = Method::ChunkSort;
      counts_.push_back(g.n);
      for (int64_t chunks; (chunks = (counts_.back() + kChunk - 1) / kChunk) > 1;) {
        const int64_t next = chunks * g.k;
        int64_t& buffer = buffer_keys_[(counts_.size() - 1) % 2];
        buffer = std::max(buffer, g.rows * next);
        counts_.push_back(next);
      }
    } else {
      method_ = Method::RowSort;
      buffer_keys_[0] = g.rows * power_of_two_at_least(g.n);
    }
    info.workspace_bytes = static_cast<size_t>(buffer_keys_[0] + buffer_keys_[1]) * sizeof(uint64_t);
  }

  template <typename T>
  void run(const void* xv, edgert_tensor* out, void* workspace, cudaStream_t stream) const {
    const T* x = static_cast<const T*>(xv);
    T* values = static_cast<T*>(out[0].data);
    int64_t* indices = static_cast<int64_t*>(out[1].data);
    const TopKRows& g = rows_;
    uint64_t* buffers[2] = {static_cast<uint64_t*>(workspace), static_cast<uint64_t*>(workspace) + buffer_keys_[0]};
    switch (method_) {
      case Method::PerThread: {
        const unsigned blocks = blocks_for(g.rows, 256);
        if (g.k == 1) topk_per_thread<T, 1><<<blocks, 256, 0, stream>>>(x, values, indices, g);
        else if (g.k <= 4) topk_per_thread<T, 4><<<blocks, 256, 0, stream>>>(x, values, indices, g);
        else topk_per_thread<T, kThreadKeep><<<blocks, 256, 0, stream>>>(x, values, indices, g);
        return check_launch("topk_per_thread");
      }
      case Method::Select: {
        const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(g.rows, 65535 * 8));
        topk_select<T><<<blocks, kSelectThreads, 0, stream>>>(x, g, values, indices);
        return check_launch("topk_select");
      }
      case Method::ChunkSort:
        for (size_t p = 0; p < counts_.size(); ++p) {
          const int64_t count = counts_[p], chunks = (count + kChunk - 1) / kChunk;
          const int sorted = static_cast<int>(power_of_two_at_least(std::min(count, kChunk)));
          const unsigned threads = std::clamp(static_cast<unsigned>(sorted / 2), 32u, kSortThreads);
          const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(g.rows * chunks, 65535 * 8));
          const uint64_t* candidates = p == 0 ? nullptr : buffers[(p - 1) % 2];
          uint64_t* next = p + 1 < counts_.size() ? buffers[p % 2] : nullptr;
          topk_sort_chunks<T><<<blocks, threads, static_cast<size_t>(sorted) * sizeof(uint64_t), stream>>>(
              x, candidates, count, chunks, sorted, g, next, values, indices);
          check_launch("topk_sort_chunks");
        }
        return;
      case Method::RowSort: {
        const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(g.rows, 65535 * 8));
        topk_sort_rows<T><<<blocks, kRowSortThreads, 0, stream>>>(x, buffers[0], power_of_two_at_least(g.n), g, values,
                                                                   indices);
        return check_launch("topk_sort_rows");
      }
    }
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  TopKRows rows_;
  Method method_ = Method::PerThread;
  std::vector<int64_t> counts_;
  int64_t buffer_keys_[2] = {0, 0};
};

}  // namespace

void register_topk_kernels(KernelRegistry& r) {
  r.add<TopKOp>("TopK", "cuda-topk", topk_supports, nullptr, 1u << 1);  // K is read on the host
}

}  // namespace edgert::cuda

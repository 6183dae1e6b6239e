#include "fast/transpose_tiled.h"

#include <algorithm>
#include <cstring>

#include "thread_pool.h"

namespace edgert::cpu {
namespace {

// Below this many bytes a node runs on the calling thread: waking the pool costs more.
constexpr int64_t kSerialBytes = 1 << 16;

constexpr int64_t kTileBytes = 64;  // a cache line

template <typename Fn>
void for_ranges(int64_t count, int64_t bytes, Fn&& fn) {
  if (bytes < kSerialBytes) return fn(int64_t{0}, count, 0);
  ThreadPool::instance().parallel_ranges(count, fn);
}

}  // namespace

std::vector<TacticSpec> transpose_tactics(const edgert_node*, const edgert_tensor*) {
  return {{kTransposeTiledTactic, "xx-transpose-tiled-portable"}};
}

bool FastTranspose::prepare(const Shape& out_shape, const std::vector<int64_t>& src_strides, size_t elem) {
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8) return false;
  elem_ = elem;
  total_ = numel(out_shape);
  rank_ = 0;
  for (size_t a = 0; a < out_shape.size(); ++a) {
    if (out_shape[a] == 1) continue;
    // The input walks this dim and the one before it as one: merge them (copy_view does too).
    if (rank_ > 0 && src_strides_[rank_ - 1] == src_strides[a] * out_shape[a]) {
      dims_[rank_ - 1] *= out_shape[a];
      src_strides_[rank_ - 1] = src_strides[a];
      continue;
    }
    dims_[rank_] = out_shape[a];
    src_strides_[rank_] = src_strides[a];
    ++rank_;
  }
  int64_t stride = 1;
  for (int a = rank_; a-- > 0;) {
    dst_strides_[a] = stride;
    stride *= dims_[a];
  }
  tile_dim_ = -1;
  if (rank_ >= 2 && src_strides_[rank_ - 1] != 1) {
    // The input's innermost dim of more than one element has stride 1, and merging kept it.
    tile_dim_ = 0;
    for (int a = 1; a < rank_ - 1; ++a)
      if (src_strides_[a] < src_strides_[tile_dim_]) tile_dim_ = a;
  }
  return true;
}

void FastTranspose::execute(const void* src, void* dst) const {
  if (total_ == 0) return;
  if (tile_dim_ < 0) return copy_runs(static_cast<const char*>(src), static_cast<char*>(dst));
  switch (elem_) {
    case 1: return copy_tiles(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst));
    case 2: return copy_tiles(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst));
    case 4: return copy_tiles(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst));
    default: return copy_tiles(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst));
  }
}

void FastTranspose::copy_runs(const char* src, char* dst) const {
  const int64_t elem = static_cast<int64_t>(elem_);
  if (rank_ == 0) {  // one element
    std::memcpy(dst, src, elem_);
    return;
  }
  const int outer = rank_ - 1;
  const int64_t run = dims_[outer], run_bytes = run * elem;
  for_ranges(total_ / run, total_ * elem, [&](int64_t begin, int64_t end, int) {
    // Local copies: the memcpy between odometer steps could write the members, as far as the
    // compiler knows, so it would load them again after every run.
    int64_t dims[EDGERT_MAX_RANK], strides[EDGERT_MAX_RANK], counter[EDGERT_MAX_RANK] = {};
    int64_t offset = 0, rest = begin;
    for (int a = outer; a-- > 0;) {
      dims[a] = dims_[a];
      strides[a] = src_strides_[a];
      counter[a] = rest % dims[a];
      rest /= dims[a];
      offset += counter[a] * strides[a];
    }
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(dst + r * run_bytes, src + offset * elem, static_cast<size_t>(run_bytes));
      for (int a = outer; a-- > 0;) {  // the next run, like an odometer
        offset += strides[a];
        if (++counter[a] < dims[a]) break;
        offset -= strides[a] * dims[a];
        counter[a] = 0;
      }
    }
  });
}

// A task is a strip of up to kTile rows of the tile dim (p) across the whole innermost output
// dim (q), for one position of the other dims. A tile writes kTile output rows of kTile
// elements (one cache line each) and reads kTile input runs of kTile elements.
template <typename T>
void FastTranspose::copy_tiles(const T* src, T* dst) const {
  constexpr int64_t kTile = kTileBytes / static_cast<int64_t>(sizeof(T));
  const int p = tile_dim_, q = rank_ - 1;
  const int64_t rows = dims_[p], cols = dims_[q];
  const int64_t src_row = src_strides_[p], src_col = src_strides_[q], dst_row = dst_strides_[p];
  int others[EDGERT_MAX_RANK];
  int num_others = 0;
  for (int a = 0; a < q; ++a)
    if (a != p) others[num_others++] = a;
  const int64_t strips = (rows + kTile - 1) / kTile;
  const int64_t tasks = total_ / (rows * cols) * strips;
  for_ranges(tasks, total_ * static_cast<int64_t>(sizeof(T)), [&](int64_t begin, int64_t end, int) {
    int64_t counter[EDGERT_MAX_RANK] = {};
    int64_t rest = begin / strips, strip = begin % strips;
    for (int k = num_others; k-- > 0;) {
      counter[k] = rest % dims_[others[k]];
      rest /= dims_[others[k]];
    }
    for (int64_t t = begin; t < end; ++t) {
      int64_t src_base = 0, dst_base = 0;
      for (int k = 0; k < num_others; ++k) {
        src_base += counter[k] * src_strides_[others[k]];
        dst_base += counter[k] * dst_strides_[others[k]];
      }
      const int64_t i0 = strip * kTile, height = std::min(kTile, rows - i0);
      const T* s = src + src_base + i0 * src_row;
      T* d = dst + dst_base + i0 * dst_row;
      for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
        const int64_t width = std::min(kTile, cols - j0);
        for (int64_t i = 0; i < height; ++i)
          for (int64_t j = j0; j < j0 + width; ++j) d[i * dst_row + j] = s[i * src_row + j * src_col];
      }
      if (++strip < strips) continue;
      strip = 0;
      for (int k = num_others; k-- > 0;) {  // the next position of the other dims
        if (++counter[k] < dims_[others[k]]) break;
        counter[k] = 0;
      }
    }
  });
}

}  // namespace edgert::cpu

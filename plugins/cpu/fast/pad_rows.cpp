#include "fast/pad_rows.h"

#include <algorithm>
#include <cstring>

#include "thread_pool.h"

namespace edgert::cpu {
namespace {

// Below this many output bytes a node runs on the calling thread: waking the pool costs more.
constexpr int64_t kSerialBytes = 1 << 16;

// The input coordinate that coordinate x (the output's, less the pad before it) reads in a dim
// of n, -1 for the constant value. The reference's mapping (PadOp in tensor_layout.cpp) written
// a second time, so that the test compares two independent ones.
int64_t source_coordinate(PadMode mode, int64_t x, int64_t n) {
  if (x >= 0 && x < n) return x;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Edge: return x < 0 ? 0 : n - 1;
    case PadMode::Wrap: return ((x % n) + n) % n;
    case PadMode::Reflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);  // reflect without repeating the edge
      const int64_t p = ((x % period) + period) % period;
      return p >= n ? period - p : p;
    }
  }
  return -1;
}

// `count` copies of the element `value`: memset for zero bytes, else doubling memcpys.
void fill_elements(char* dst, int64_t count, const unsigned char* value, size_t elem, bool zero_value) {
  if (count <= 0) return;
  if (zero_value) {
    std::memset(dst, 0, static_cast<size_t>(count) * elem);
    return;
  }
  std::memcpy(dst, value, elem);
  for (int64_t done = 1; done < count;) {
    const int64_t n = std::min(done, count - done);
    std::memcpy(dst + done * static_cast<int64_t>(elem), dst, static_cast<size_t>(n) * elem);
    done += n;
  }
}

}  // namespace

std::vector<TacticSpec> pad_tactics(const edgert_node*, const edgert_tensor*) {
  return {{kPadRowsTactic, "xx-pad-rows-portable"}};
}

void FastPad::prepare(PadMode mode, const Shape& in_shape, const std::vector<int64_t>& pads, size_t elem) {
  mode_ = mode;
  elem_ = elem;
  const size_t rank = in_shape.size();
  dims_.clear();
  for (size_t a = 0; a < rank; ++a) {
    const int64_t n = in_shape[a], begin = pads[a], end = pads[a + rank];
    // A dim left alone is whole rows of the dim before it. The constant value pads such rows
    // like single elements; the other modes repeat rows, so there only unpadded dims merge.
    const bool padded = begin != 0 || end != 0;
    const bool previous_padded = !dims_.empty() && (dims_.back().begin != 0 || dims_.back().out != dims_.back().in);
    if (!dims_.empty() && !padded && (mode == PadMode::Constant || !previous_padded)) {
      Dim& d = dims_.back();
      d.in *= n;
      d.out *= n;
      d.begin *= n;
      continue;
    }
    dims_.push_back(Dim{n, n + begin + end, begin, 1});
  }
  if (dims_.empty()) dims_.push_back(Dim{});  // a scalar: one row of one element
  int64_t stride = 1;
  for (size_t a = dims_.size(); a-- > 0;) {
    dims_[a].in_stride = stride;
    stride *= dims_[a].in;
  }
  outer_tables_.clear();
  outer_table_start_.clear();
  rows_ = 1;
  for (size_t a = 0; a + 1 < dims_.size(); ++a) {
    const Dim& d = dims_[a];
    outer_table_start_.push_back(outer_tables_.size());
    for (int64_t i = 0; i < d.out; ++i) {
      const int64_t x = source_coordinate(mode, i - d.begin, d.in);
      outer_tables_.push_back(x < 0 ? -1 : x * d.in_stride);
    }
    rows_ *= d.out;
  }
  const Dim& row = dims_.back();
  copy_begin_ = std::clamp<int64_t>(row.begin, 0, row.out);
  copy_end_ = std::clamp<int64_t>(row.in + row.begin, copy_begin_, row.out);
}

void FastPad::write_row(char* out, const char* in, const unsigned char* value, bool zero_value) const {
  const Dim& row = dims_.back();
  const int64_t elem = static_cast<int64_t>(elem_);
  if (copy_end_ > copy_begin_)
    std::memcpy(out + copy_begin_ * elem, in + (copy_begin_ - row.begin) * elem,
                static_cast<size_t>(copy_end_ - copy_begin_) * elem_);
  if (mode_ == PadMode::Constant) {
    fill_elements(out, copy_begin_, value, elem_, zero_value);
    fill_elements(out + copy_end_ * elem, row.out - copy_end_, value, elem_, zero_value);
    return;
  }
  auto copy_pad = [&](int64_t i) {
    std::memcpy(out + i * elem, in + source_coordinate(mode_, i - row.begin, row.in) * elem, elem_);
  };
  for (int64_t i = 0; i < copy_begin_; ++i) copy_pad(i);
  for (int64_t i = copy_end_; i < row.out; ++i) copy_pad(i);
}

void FastPad::execute(const void* src_data, void* dst_data, const unsigned char* value) const {
  const Dim& row = dims_.back();
  if (rows_ == 0 || row.out == 0) return;
  bool zero_value = true;
  for (size_t i = 0; i < elem_; ++i) zero_value = zero_value && value[i] == 0;
  const int outer = static_cast<int>(dims_.size()) - 1;
  const int64_t row_bytes = row.out * static_cast<int64_t>(elem_);
  const char* src = static_cast<const char*>(src_data);
  char* dst = static_cast<char*>(dst_data);
  auto run = [&](int64_t begin, int64_t end, int) {
    int64_t counter[EDGERT_MAX_RANK] = {};
    int64_t rest = begin;
    for (int a = outer; a-- > 0;) {
      counter[a] = rest % dims_[a].out;
      rest /= dims_[a].out;
    }
    for (int64_t r = begin; r < end; ++r) {
      int64_t offset = 0;
      bool inside = true;
      for (int a = 0; a < outer && inside; ++a) {
        const int64_t source = outer_tables_[outer_table_start_[a] + static_cast<size_t>(counter[a])];
        inside = source >= 0;
        offset += source;
      }
      char* out_row = dst + r * row_bytes;
      if (inside) write_row(out_row, src + offset * static_cast<int64_t>(elem_), value, zero_value);
      else fill_elements(out_row, row.out, value, elem_, zero_value);
      for (int a = outer; a-- > 0;) {  // the next row's coordinates, like an odometer
        if (++counter[a] < dims_[a].out) break;
        counter[a] = 0;
      }
    }
  };
  if (rows_ * row_bytes < kSerialBytes) return run(0, rows_, 0);
  ThreadPool::instance().parallel_ranges(rows_, run);
}

}  // namespace edgert::cpu

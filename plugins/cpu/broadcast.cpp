#include "broadcast.h"

#include <algorithm>

namespace edgert::cpu {

Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    size_t shift = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[shift + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string all;
      for (const Shape& t : shapes) all += shape_string(t) + " ";
      fail(EDGERT_ERR_SHAPE, "shapes %scannot be broadcast together", all.c_str());
    }
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const Shape& input, const Shape& output) {
  std::vector<int64_t> strides(output.size(), 0);
  int64_t stride = 1;
  size_t shift = output.size() - input.size();
  for (size_t i = input.size(); i-- > 0;) {
    strides[shift + i] = input[i] == 1 ? 0 : stride;
    stride *= input[i];
  }
  return strides;
}

BroadcastIterator::BroadcastIterator(const Shape& output, const std::vector<Shape>& inputs)
    : output_(output), counter_(output.size(), 0), offsets_(inputs.size(), 0), total_(numel(output)) {
  for (const Shape& s : inputs) strides_.push_back(broadcast_strides(s, output));
}

void BroadcastIterator::next() {
  ++index_;
  for (size_t d = output_.size(); d-- > 0;) {
    if (++counter_[d] < output_[d]) {
      for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] += strides_[k][d];
      return;
    }
    for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] -= strides_[k][d] * (counter_[d] - 1);
    counter_[d] = 0;
  }
}

}  // namespace edgert::cpu

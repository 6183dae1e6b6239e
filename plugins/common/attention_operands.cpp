#include "attention_operands.h"

#include <algorithm>

namespace edgert::plugin {
namespace {

std::vector<int64_t> contiguous_strides(const Shape& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// `perm` from attribute `name`, checked: a permutation of `rank` axes that keeps the last one last.
std::vector<int64_t> view_perm(const edgert_node& node, const char* name, size_t rank) {
  const std::vector<int64_t> perm = Attributes(&node).get_ints(name);
  if (perm.empty()) return perm;
  std::vector<bool> seen(rank, false);
  bool ok = perm.size() == rank && perm.back() == static_cast<int64_t>(rank) - 1;
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < static_cast<int64_t>(rank) && !seen[static_cast<size_t>(p)];
    if (ok) seen[static_cast<size_t>(p)] = true;
  }
  if (!ok) fail(EDGERT_ERR_INVALID_ARGUMENT, "%s is no permutation of %zu axes that keeps the last one last", name, rank);
  return perm;
}

// Input `t` as the attention reads it: itself or one index of one of its axes (attribute
// `select`), then as it is or its Transpose by the perm in attribute `perm_name`.
AttentionOperand input_view(const edgert_node& node, const edgert_tensor& t, const char* select, const char* perm_name,
                            int index) {
  Shape dims = shape_of(t);
  std::vector<int64_t> strides = contiguous_strides(dims);
  int64_t offset = 0;
  const std::vector<int64_t> chosen = Attributes(&node).get_ints(select);
  if (!chosen.empty()) {
    if (chosen.size() != 2 || chosen[0] < 0 || chosen[0] + 1 >= static_cast<int64_t>(dims.size()))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "%s is not [axis, index] of an axis before the last of input %d %s", select,
           index, shape_string(dims).c_str());
    const size_t axis = static_cast<size_t>(chosen[0]);
    if (chosen[1] < 0 || chosen[1] >= dims[axis])
      fail(EDGERT_ERR_SHAPE, "%s index %lld is outside axis %zu of input %d %s", select, static_cast<long long>(chosen[1]),
           axis, index, shape_string(dims).c_str());
    offset = chosen[1] * strides[axis];
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
    strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(axis));
  }
  if (dims.size() < 2) fail(EDGERT_ERR_SHAPE, "input %d has rank %zu as read, expected 2 or more", index, dims.size());
  const std::vector<int64_t> perm = view_perm(node, perm_name, dims.size());
  if (perm.empty()) return {dims, strides, {}, offset};
  AttentionOperand view;
  view.offset = offset;
  for (int64_t p : perm) {
    view.dims.push_back(dims[static_cast<size_t>(p)]);
    view.strides.push_back(strides[static_cast<size_t>(p)]);
  }
  return view;
}

// `operand`'s strides along the output's batch dims `batch` (right-aligned; 0 where it broadcasts).
std::vector<int64_t> batch_strides(const AttentionOperand& operand, const Shape& batch) {
  const size_t own = operand.dims.size() - 2, offset = batch.size() - own;
  std::vector<int64_t> strides(batch.size(), 0);
  for (size_t i = 0; i < own; ++i)
    strides[offset + i] = operand.dims[i] == 1 ? 0 : operand.strides[i];
  return strides;
}

}  // namespace

AttentionOperands attention_operands(const edgert_node& node, const edgert_tensor* in) {
  AttentionOperands a;
  a.q = input_view(node, in[0], "q_select", "q_perm", 0);
  a.keys = input_view(node, in[1], "k_select", "k_perm", 1);
  a.v = input_view(node, in[2], "v_select", "v_perm", 2);
  a.keys_transposed = Attributes(&node).get_int("keys_transposed", 1) != 0;
  const Shape &q = a.q.dims, &k = a.keys.dims, &v = a.v.dims;
  const int64_t k_rows = k[k.size() - 2], k_cols = k.back();
  a.l = q[q.size() - 2];
  a.d = q.back();
  a.s = a.keys_transposed ? k_cols : k_rows;
  a.dv = v.back();
  if ((a.keys_transposed ? k_rows : k_cols) != a.d || v[v.size() - 2] != a.s)
    fail(EDGERT_ERR_SHAPE, "Q %s, %s %s and V %s do not chain as Q %s V", shape_string(q).c_str(),
         a.keys_transposed ? "Kt" : "K", shape_string(k).c_str(), shape_string(v).c_str(),
         a.keys_transposed ? "Kt" : "K^T");
  // The output's batch dims: Q's, the keys' and V's broadcast as MatMul's.
  const size_t rank = std::max({q.size(), k.size(), v.size()}) - 2;
  a.batch.assign(rank, 1);
  for (const Shape* dims : {&q, &k, &v})
    for (size_t i = 0; i + 2 < dims->size(); ++i) {
      int64_t& extent = a.batch[rank - (dims->size() - 2) + i];
      const int64_t e = (*dims)[i];
      if (e != 1 && extent != 1 && e != extent)
        fail(EDGERT_ERR_SHAPE, "batch dims of Q %s, %s %s and V %s do not broadcast", shape_string(q).c_str(),
             a.keys_transposed ? "Kt" : "K", shape_string(k).c_str(), shape_string(v).c_str());
      if (e != 1) extent = e;
    }
  a.q.batch = batch_strides(a.q, a.batch);
  a.keys.batch = batch_strides(a.keys, a.batch);
  a.v.batch = batch_strides(a.v, a.batch);
  // The output [batch..., L, Dv]; with y_perm the tensor written is its Transpose.
  a.y.dims = a.batch;
  a.y.dims.push_back(a.l);
  a.y.dims.push_back(a.dv);
  const std::vector<int64_t> perm = view_perm(node, "y_perm", a.y.dims.size());
  if (perm.empty()) {
    a.y_shape = a.y.dims;
    a.y.strides = contiguous_strides(a.y.dims);
  } else {
    for (int64_t p : perm) a.y_shape.push_back(a.y.dims[static_cast<size_t>(p)]);
    const std::vector<int64_t> written = contiguous_strides(a.y_shape);
    a.y.strides.assign(perm.size(), 0);
    for (size_t j = 0; j < perm.size(); ++j) a.y.strides[static_cast<size_t>(perm[j])] = written[j];
  }
  a.y.batch = batch_strides(a.y, a.batch);
  return a;
}

int64_t batch_offset(const AttentionOperands& a, const AttentionOperand& operand, int64_t b) {
  int64_t offset = operand.offset;
  for (size_t d = a.batch.size(); d-- > 0;) {
    offset += (b % a.batch[d]) * operand.batch[d];
    b /= a.batch[d];
  }
  return offset;
}

}  // namespace edgert::plugin

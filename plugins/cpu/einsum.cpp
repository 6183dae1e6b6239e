// Einsum: a general equation (explicit or implicit output, ellipsis broadcasting, repeated
// labels for diagonals and traces) evaluated as one loop over every combination of label
// values, summing products into the output. Slow but obviously right: the reference.
#include <algorithm>
#include <string>

#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {
namespace {

constexpr int kEllipsis = -1;      // marker while parsing a term
constexpr int kEllipsisBase = 128;  // label id of the first ellipsis dim (letters use their ASCII code)

// Parses one term ("ab...c") into letter codes with kEllipsis standing for "...".
std::vector<int> parse_term(const std::string& term, const std::string& equation) {
  std::vector<int> labels;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char ch = term[i];
    if (ch == '.') {
      if (term.compare(i, 3, "...") != 0 || seen_ellipsis)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "equation '%s': malformed or repeated ellipsis in term '%s'",
             equation.c_str(), term.c_str());
      seen_ellipsis = true;
      labels.push_back(kEllipsis);
      i += 2;
    } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
      labels.push_back(ch);
    } else {
      fail(EDGERT_ERR_INVALID_ARGUMENT, "equation '%s': unexpected character '%c'", equation.c_str(), ch);
    }
  }
  return labels;
}

class EinsumOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const int n_in = node.num_inputs;
    if (n_in < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs at least one input");
    for (int i = 0; i < n_in; ++i)
      if (in[i].dtype != in[0].dtype)
        fail(EDGERT_ERR_SHAPE, "input %d has dtype %s, input 0 has %s", i, dtype_name(in[i].dtype), dtype_name(in[0].dtype));
    dispatch(in[0].dtype, kNumeric, [](auto) {}, "input");

    std::string equation;
    for (char ch : Attributes(&node).get_string("equation", ""))
      if (ch != ' ' && ch != '\t') equation += ch;
    const size_t arrow = equation.find("->");
    const std::string lhs = equation.substr(0, arrow);
    std::vector<std::vector<int>> terms;
    for (size_t start = 0;;) {
      size_t comma = lhs.find(',', start);
      terms.push_back(parse_term(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start), equation));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (static_cast<int>(terms.size()) != n_in)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "equation '%s' has %zu input terms, the node has %d inputs", equation.c_str(),
           terms.size(), n_in);

    // Expand ellipses into ids kEllipsisBase + j, right-aligned across inputs (broadcasting).
    int ellipsis_rank = 0;
    std::vector<int> ell_dims(n_in, 0);
    for (int i = 0; i < n_in; ++i) {
      const int letters = static_cast<int>(std::count_if(terms[i].begin(), terms[i].end(), [](int l) { return l != kEllipsis; }));
      const bool has_ell = letters != static_cast<int>(terms[i].size());
      ell_dims[i] = in[i].rank - letters;
      if (ell_dims[i] < 0 || (!has_ell && ell_dims[i] != 0))
        fail(EDGERT_ERR_SHAPE, "equation '%s': term %d has %d labels, input %d has rank %d", equation.c_str(), i, letters, i,
             in[i].rank);
      ellipsis_rank = std::max(ellipsis_rank, ell_dims[i]);
    }
    int64_t size_of[kEllipsisBase + EDGERT_MAX_RANK];
    std::fill(std::begin(size_of), std::end(size_of), -1);
    int occurrences[kEllipsisBase] = {};
    std::vector<std::vector<int>> axis_labels(n_in);  // label id of every axis of every input
    for (int i = 0; i < n_in; ++i) {
      for (int l : terms[i]) {
        if (l == kEllipsis) {
          for (int j = 0; j < ell_dims[i]; ++j) axis_labels[i].push_back(kEllipsisBase + ellipsis_rank - ell_dims[i] + j);
        } else {
          axis_labels[i].push_back(l);
          ++occurrences[l];
        }
      }
      for (int a = 0; a < in[i].rank; ++a) {
        const int l = axis_labels[i][a];
        const int64_t d = in[i].dims[a];
        int64_t& s = size_of[l];
        if (s == -1 || (l >= kEllipsisBase && s == 1)) s = d;
        else if (s != d && !(l >= kEllipsisBase && d == 1))
          fail(EDGERT_ERR_SHAPE, "equation '%s': label '%c' has size %lld in one place and %lld in another", equation.c_str(),
               l < kEllipsisBase ? l : '.', static_cast<long long>(s), static_cast<long long>(d));
      }
    }

    std::vector<int> out_labels;
    if (arrow != std::string::npos) {
      for (int l : parse_term(equation.substr(arrow + 2), equation)) {
        if (l == kEllipsis) {
          for (int j = 0; j < ellipsis_rank; ++j) out_labels.push_back(kEllipsisBase + j);
          continue;
        }
        if (size_of[l] == -1 || std::count(out_labels.begin(), out_labels.end(), l))
          fail(EDGERT_ERR_INVALID_ARGUMENT, "equation '%s': output label '%c' is repeated or not in any input",
               equation.c_str(), l);
        out_labels.push_back(l);
      }
    } else {  // implicit: broadcast dims, then labels seen once, in alphabetical (ASCII) order
      for (int j = 0; j < ellipsis_rank; ++j) out_labels.push_back(kEllipsisBase + j);
      for (int l = 0; l < kEllipsisBase; ++l)
        if (occurrences[l] == 1) out_labels.push_back(l);
    }

    // The loop runs over the output labels (outermost), then every contracted label.
    std::vector<int> all = out_labels;
    for (int l = 0; l < kEllipsisBase + ellipsis_rank; ++l)
      if (size_of[l] != -1 && std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);
    const size_t n = all.size();
    dims_.assign(n, 0);
    for (size_t k = 0; k < n; ++k) dims_[k] = size_of[all[k]];
    strides_.assign(n_in, std::vector<int64_t>(n, 0));
    for (int i = 0; i < n_in; ++i) {
      int64_t stride = 1;
      for (int a = in[i].rank - 1; a >= 0; --a) {
        const size_t k = static_cast<size_t>(std::find(all.begin(), all.end(), axis_labels[i][a]) - all.begin());
        if (in[i].dims[a] == dims_[k]) strides_[i][k] += stride;  // repeated labels add: diagonals
        stride *= in[i].dims[a];
      }
    }
    out_strides_.assign(n, 0);
    Shape out_shape;
    for (int l : out_labels) out_shape.push_back(size_of[l]);
    for (size_t k = out_labels.size(), stride = 1; k-- > 0;) {
      out_strides_[k] = static_cast<int64_t>(stride);
      stride *= static_cast<size_t>(dims_[k]);
    }
    counter_.assign(n, 0);
    offsets_.assign(n_in, 0);
    set_output(out[0], in[0].dtype, out_shape);
    info.workspace_bytes = static_cast<size_t>(numel(out_shape)) * 8;
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    dispatch(in[0].dtype, kNumeric, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using Acc = acc_t<T>;
      Acc* acc = static_cast<Acc*>(workspace);
      const int64_t out_n = numel(out[0]);
      std::fill(acc, acc + out_n, Acc(0));
      const int n_in = node.num_inputs;
      const size_t n = dims_.size();
      bool empty = false;
      for (int64_t d : dims_) empty = empty || d == 0;
      std::fill(counter_.begin(), counter_.end(), 0);
      std::fill(offsets_.begin(), offsets_.end(), 0);
      int64_t out_offset = 0;
      while (!empty) {
        Acc product = 1;
        for (int i = 0; i < n_in; ++i) product *= static_cast<Acc>(static_cast<compute_t<T>>(data_as<T>(in[i])[offsets_[i]]));
        acc[out_offset] += product;
        size_t k = n;
        while (k-- > 0) {  // odometer step; offsets follow incrementally
          for (int i = 0; i < n_in; ++i) offsets_[i] += strides_[i][k];
          out_offset += out_strides_[k];
          if (++counter_[k] < dims_[k]) break;
          for (int i = 0; i < n_in; ++i) offsets_[i] -= strides_[i][k] * dims_[k];
          out_offset -= out_strides_[k] * dims_[k];
          counter_[k] = 0;
        }
        if (k == static_cast<size_t>(-1)) break;
      }
      T* y = data_as<T>(out[0]);
      for (int64_t i = 0; i < out_n; ++i) y[i] = static_cast<T>(static_cast<compute_t<T>>(acc[i]));
    });
  }

 private:
  std::vector<int64_t> dims_;                  // size of every loop label
  std::vector<std::vector<int64_t>> strides_;  // per input, per loop label
  std::vector<int64_t> out_strides_;           // per loop label (0 for contracted ones)
  std::vector<int64_t> counter_, offsets_;     // execute's odometer state, sized in prepare
};

}  // namespace

void register_einsum_kernels(KernelRegistry& r) { r.add<EinsumOp>("Einsum", "ref-einsum"); }

}  // namespace edgert::cpu

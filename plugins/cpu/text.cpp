// Text: TfIdfVectorizer over integer tokens (string pools are not supported).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "kernel.h"

namespace edgert::cpu {
namespace {

int32_t tfidf_supports(const edgert_node* node, const edgert_tensor* inputs) {
  Attributes attrs(node);
  if (attrs.has("pool_strings") && !attrs.has("pool_int64s")) return 0;
  return inputs[0].dtype == EDGERT_DTYPE_INT32 || inputs[0].dtype == EDGERT_DTYPE_INT64 ||
                 inputs[0].dtype == EDGERT_DTYPE_UNDEFINED
             ? 1
             : 0;
}

// Counts the pool's n-grams in each row of X, as ONNX Runtime does: for every skip distance,
// n-grams of min..max length start at every position, their items skip_distance apart;
// unigrams are counted for the first skip distance only (skipping does not change them).
class TfIdfVectorizerOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    if (in[0].dtype != EDGERT_DTYPE_INT32 && in[0].dtype != EDGERT_DTYPE_INT64)
      fail(EDGERT_ERR_UNSUPPORTED, "X has dtype %s; only int32 and int64 tokens are supported", dtype_name(in[0].dtype));
    if (in[0].rank != 1 && in[0].rank != 2)
      fail(EDGERT_ERR_SHAPE, "X must have rank 1 or 2, found %s", shape_string(shape_of(in[0])).c_str());
    min_gram_ = attrs.get_int("min_gram_length", 1);
    max_gram_ = attrs.get_int("max_gram_length", 1);
    max_skip_ = attrs.get_int("max_skip_count", 0);
    if (min_gram_ < 1 || max_gram_ < min_gram_ || max_skip_ < 0)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "min_gram_length %lld, max_gram_length %lld, max_skip_count %lld: expected 1 <= min <= max, skip >= 0",
           static_cast<long long>(min_gram_), static_cast<long long>(max_gram_), static_cast<long long>(max_skip_));
    std::string mode = attrs.get_string("mode", "TF");
    if (mode == "TF") mode_ = Mode::Tf;
    else if (mode == "IDF") mode_ = Mode::Idf;
    else if (mode == "TFIDF") mode_ = Mode::TfIdf;
    else fail(EDGERT_ERR_INVALID_ARGUMENT, "mode must be TF, IDF or TFIDF, got '%s'", mode.c_str());
    weights_ = attrs.get_floats("weights");

    // ngram_counts[n-1] is where the n-grams start in the pool; the n-grams are numbered in
    // pool order and ngram_indexes maps that number to an output column.
    std::vector<int64_t> counts = attrs.get_ints("ngram_counts");
    std::vector<int64_t> indexes = attrs.get_ints("ngram_indexes");
    std::vector<int64_t> pool = attrs.get_ints("pool_int64s");
    if (indexes.empty()) fail(EDGERT_ERR_INVALID_ARGUMENT, "ngram_indexes must not be empty");
    output_size_ = *std::max_element(indexes.begin(), indexes.end()) + 1;
    pool_.clear();
    size_t ngram_number = 0;
    for (size_t level = 0; level < counts.size(); ++level) {
      const size_t n = level + 1;
      const size_t begin = static_cast<size_t>(counts[level]);
      const size_t end = level + 1 < counts.size() ? static_cast<size_t>(counts[level + 1]) : pool.size();
      if (begin > end || end > pool.size() || (end - begin) % n != 0)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "ngram_counts do not split pool_int64s (%zu items) into %zu-grams", pool.size(), n);
      for (size_t p = begin; p < end; p += n, ++ngram_number) {
        if (ngram_number >= indexes.size())
          fail(EDGERT_ERR_INVALID_ARGUMENT, "ngram_indexes has %zu entries, the pool holds more n-grams", indexes.size());
        pool_[std::vector<int64_t>(pool.begin() + static_cast<std::ptrdiff_t>(p),
                                   pool.begin() + static_cast<std::ptrdiff_t>(p + n))] = indexes[ngram_number];
      }
    }
    if (!weights_.empty() && static_cast<int64_t>(weights_.size()) < output_size_)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "weights has %zu entries, expected %lld", weights_.size(),
           static_cast<long long>(output_size_));

    if (in[0].rank == 1) set_output(out[0], EDGERT_DTYPE_FLOAT32, {output_size_});
    else set_output(out[0], EDGERT_DTYPE_FLOAT32, {in[0].dims[0], output_size_});
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const int64_t rows = in[0].rank == 1 ? 1 : in[0].dims[0];
    const int64_t cols = in[0].rank == 1 ? in[0].dims[0] : in[0].dims[1];
    float* y = data_as<float>(out[0]);
    std::vector<int64_t>& gram = scratch_;  // reused across calls: no allocation once sized
    gram.reserve(static_cast<size_t>(max_gram_));
    auto token = [&](int64_t i) -> int64_t {
      return in[0].dtype == EDGERT_DTYPE_INT32 ? data_as<int32_t>(in[0])[i] : data_as<int64_t>(in[0])[i];
    };
    for (int64_t r = 0; r < rows; ++r) {
      float* row_out = y + r * output_size_;
      std::fill(row_out, row_out + output_size_, 0.f);
      int64_t min_gram = min_gram_;
      for (int64_t skip = 1; skip <= max_skip_ + 1; ++skip) {
        for (int64_t start = 0; start < cols; ++start) {
          gram.clear();
          for (int64_t n = 1, pos = start; n <= max_gram_ && pos < cols; ++n, pos += skip) {
            gram.push_back(token(r * cols + pos));
            if (n < min_gram) continue;
            auto hit = pool_.find(gram);
            if (hit != pool_.end()) row_out[hit->second] += 1.f;
          }
        }
        if (min_gram == 1 && ++min_gram > max_gram_) break;
      }
      for (int64_t i = 0; i < output_size_; ++i) {
        const float w = weights_.empty() ? 1.f : weights_[static_cast<size_t>(i)];
        if (mode_ == Mode::Idf) row_out[i] = row_out[i] > 0 ? w : 0.f;
        else if (mode_ == Mode::TfIdf) row_out[i] *= w;
      }
    }
  }

 private:
  enum class Mode { Tf, Idf, TfIdf };
  Mode mode_ = Mode::Tf;
  int64_t min_gram_ = 1, max_gram_ = 1, max_skip_ = 0, output_size_ = 0;
  std::vector<float> weights_;
  std::map<std::vector<int64_t>, int64_t> pool_;  // n-gram -> output column
  std::vector<int64_t> scratch_;
};

}  // namespace

void register_text_kernels(KernelRegistry& r) {
  r.add<TfIdfVectorizerOp>("TfIdfVectorizer", "ref-tfidf-vectorizer", tfidf_supports);
}

}  // namespace edgert::cpu

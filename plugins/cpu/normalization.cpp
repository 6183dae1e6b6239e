// BatchNormalization, InstanceNormalization, LayerNormalization, LRN, MeanVarianceNormalization.
//
// Statistics are computed in double: the ONNX test references compute them in float32 with
// numpy, and double keeps us within their tolerances for any reduction order. Float32
// LayerNormalization over rows (Scale of the normalized dims' shape) has the tactic
// f32-layer-norm-rows (fast/norm_rows.h).
#include <cmath>
#include <cstring>

#include "broadcast.h"
#include "fast/norm_rows.h"
#include "kernel.h"
#include "strided_walk.h"

namespace edgert::cpu {
namespace {

// Element i of a floating point tensor, for per-channel parameters (few reads, dtype switch ok).
double value_at(const edgert_tensor& t, int64_t i) {
  return dispatch(t.dtype, kFloats, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return static_cast<double>(static_cast<compute_t<T>>(data_as<T>(t)[i]));
  }, "parameter");
}

void store_at(edgert_tensor& t, int64_t i, double v) {
  dispatch(t.dtype, kFloats, [&](auto tag) {
    using T = typename decltype(tag)::type;
    data_as<T>(t)[i] = static_cast<T>(static_cast<compute_t<T>>(v));
  }, "output");
}

void require_channels(const edgert_tensor& t, int64_t channels, const char* what) {
  if (numel(t) != channels)
    fail(EDGERT_ERR_SHAPE, "%s must hold one value per channel (%lld), its shape is %s", what,
         static_cast<long long>(channels), shape_string(shape_of(t)).c_str());
  dispatch(t.dtype, kFloats, [](auto) {}, what);
}

// X as N x C x spatial.
struct NCS {
  int64_t n = 1, c = 1, spatial = 1;
};

NCS ncs_of(const edgert_tensor& x) {
  if (x.rank < 2) fail(EDGERT_ERR_SHAPE, "input must have rank >= 2 (N x C x ...), its shape is %s",
                       shape_string(shape_of(x)).c_str());
  NCS v;
  v.n = x.dims[0];
  v.c = x.dims[1];
  for (int i = 2; i < x.rank; ++i) v.spatial *= x.dims[i];
  return v;
}

int32_t batchnorm_supports(const edgert_node* node, const edgert_tensor*) {
  Attributes attrs(node);
  // Before opset 14, extra outputs meant an old training form (saved mean/var) not run here;
  // spatial=0 (opsets 7-8) takes per-element parameters.
  if (node->opset < 14 && node->num_outputs > 1) return 0;
  if (attrs.get_int("spatial", 1) == 0) return 0;
  return 1;
}

class BatchNormOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, kFloats, [](auto) {}, "X");
    epsilon_ = attrs.get_float("epsilon", 1e-5f);
    momentum_ = attrs.get_float("momentum", 0.9f);
    training_ = node.opset >= 14 && attrs.get_int("training_mode", 0) != 0;
    dims_ = ncs_of(in[0]);
    const char* names[] = {"scale", "B", "input_mean", "input_var"};
    for (int i = 1; i <= 4; ++i) require_channels(in[i], dims_.c, names[i - 1]);
    set_output(out[0], in[0].dtype, shape_of(in[0]));
    // running_mean / running_var: only meaningful in training mode, but always shaped.
    for (int i = 1; i < node.num_outputs && i < 3; ++i) set_output(out[i], in[3].dtype, {dims_.c});
    if (node.num_outputs > 3) fail(EDGERT_ERR_UNSUPPORTED, "expects at most 3 outputs, node has %d", node.num_outputs);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      const int64_t plane = dims_.spatial, stride = dims_.c * plane;
      for (int64_t c = 0; c < dims_.c; ++c) {
        double mean = value_at(in[3], c), var = value_at(in[4], c);
        if (training_) {
          // Batch statistics over N and spatial; population variance as numpy's var().
          double sum = 0, count = static_cast<double>(dims_.n * plane);
          for (int64_t n = 0; n < dims_.n; ++n)
            for (int64_t s = 0; s < plane; ++s) sum += static_cast<C>(x[n * stride + c * plane + s]);
          double batch_mean = count > 0 ? sum / count : 0, sq = 0;
          for (int64_t n = 0; n < dims_.n; ++n)
            for (int64_t s = 0; s < plane; ++s) {
              double d = static_cast<C>(x[n * stride + c * plane + s]) - batch_mean;
              sq += d * d;
            }
          double batch_var = count > 0 ? sq / count : 0;
          if (node.num_outputs > 1) store_at(out[1], c, mean * momentum_ + batch_mean * (1 - momentum_));
          if (node.num_outputs > 2) store_at(out[2], c, var * momentum_ + batch_var * (1 - momentum_));
          mean = batch_mean;
          var = batch_var;
        } else {
          if (node.num_outputs > 1) store_at(out[1], c, mean);
          if (node.num_outputs > 2) store_at(out[2], c, var);
        }
        double scale = value_at(in[1], c) / std::sqrt(var + epsilon_), bias = value_at(in[2], c);
        for (int64_t n = 0; n < dims_.n; ++n)
          for (int64_t s = 0; s < plane; ++s) {
            int64_t i = n * stride + c * plane + s;
            y[i] = static_cast<T>(static_cast<C>((static_cast<C>(x[i]) - mean) * scale + bias));
          }
      }
    });
  }

 private:
  double epsilon_ = 1e-5, momentum_ = 0.9;
  bool training_ = false;
  NCS dims_;
};

class InstanceNormOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    dispatch(in[0].dtype, kFloats, [](auto) {}, "input");
    epsilon_ = Attributes(&node).get_float("epsilon", 1e-5f);
    dims_ = ncs_of(in[0]);
    require_channels(in[1], dims_.c, "scale");
    require_channels(in[2], dims_.c, "B");
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const int64_t plane = dims_.spatial;
      for (int64_t n = 0; n < dims_.n; ++n)
        for (int64_t c = 0; c < dims_.c; ++c) {
          const T* x = data_as<T>(in[0]) + (n * dims_.c + c) * plane;
          T* y = data_as<T>(out[0]) + (n * dims_.c + c) * plane;
          double sum = 0, sq = 0;
          for (int64_t s = 0; s < plane; ++s) sum += static_cast<C>(x[s]);
          double mean = plane ? sum / plane : 0;
          for (int64_t s = 0; s < plane; ++s) {
            double d = static_cast<C>(x[s]) - mean;
            sq += d * d;
          }
          double var = plane ? sq / plane : 0;
          double scale = value_at(in[1], c) / std::sqrt(var + epsilon_), bias = value_at(in[2], c);
          for (int64_t s = 0; s < plane; ++s)
            y[s] = static_cast<T>(static_cast<C>((static_cast<C>(x[s]) - mean) * scale + bias));
        }
    });
  }

 private:
  double epsilon_ = 1e-5;
  NCS dims_;
};

// Y = (X - mean) / sqrt(var + epsilon) * Scale + B over the trailing axes from `axis` on.
class LayerNormOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, kFloats, [](auto) {}, "X");
    int64_t rank = in[0].rank;
    int64_t axis = normalize_axis(attrs.get_int("axis", -1), rank);
    epsilon_ = attrs.get_float("epsilon", 1e-5f);
    int64_t stash = attrs.get_int("stash_type", 1);
    edgert_dtype stash_dtype = static_cast<edgert_dtype>(stash);
    if (stash_dtype != EDGERT_DTYPE_FLOAT32 && stash_dtype != EDGERT_DTYPE_FLOAT64 &&
        stash_dtype != EDGERT_DTYPE_FLOAT16 && stash_dtype != EDGERT_DTYPE_BFLOAT16)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "stash_type must be a floating point type, got %lld",
           static_cast<long long>(stash));

    Shape x_shape = shape_of(in[0]);
    Shape normalized(x_shape.begin() + axis, x_shape.end());
    rows_ = numel(Shape(x_shape.begin(), x_shape.begin() + axis));
    cols_ = numel(normalized);
    has_bias_ = node.num_inputs > 2 && is_present(in[2]);
    map_params(in[1], normalized, "Scale", scale_index_);
    if (has_bias_) map_params(in[2], normalized, "B", bias_index_);

    set_output(out[0], in[0].dtype, x_shape);
    Shape stat_shape(x_shape.begin(), x_shape.begin() + axis);
    stat_shape.resize(x_shape.size(), 1);
    for (int i = 1; i < node.num_outputs && i < 3; ++i) set_output(out[i], stash_dtype, stat_shape);
    // layer_norm_tactics offered the tactic for this case only; a later shape or dtype outside
    // it runs the reference.
    auto is_f32 = [](const edgert_tensor& t) { return t.dtype == EDGERT_DTYPE_FLOAT32; };
    rows_kernel_ = tactic() == kLayerNormRowsTactic && is_f32(in[0]) && is_f32(in[1]) && scale_index_.empty() &&
                   (!has_bias_ || (is_f32(in[2]) && bias_index_.empty())) &&
                   (node.num_outputs == 1 || stash_dtype == EDGERT_DTYPE_FLOAT32);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (rows_kernel_) {
      LayerNormRows job;
      job.x = data_as<float>(in[0]);
      job.y = data_as<float>(out[0]);
      job.scale = data_as<float>(in[1]);
      job.bias = has_bias_ ? data_as<float>(in[2]) : nullptr;
      job.mean = node.num_outputs > 1 ? data_as<float>(out[1]) : nullptr;
      job.inv_std = node.num_outputs > 2 ? data_as<float>(out[2]) : nullptr;
      job.rows = rows_;
      job.cols = cols_;
      job.epsilon = epsilon_;
      layer_norm_rows(job);
      return;
    }
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* scale = data_as<T>(in[1]);
      const T* bias = has_bias_ ? data_as<T>(in[2]) : nullptr;
      for (int64_t r = 0; r < rows_; ++r) {
        const T* x = data_as<T>(in[0]) + r * cols_;
        T* y = data_as<T>(out[0]) + r * cols_;
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < cols_; ++j) sum += static_cast<C>(x[j]);
        double mean = cols_ ? sum / cols_ : 0;
        for (int64_t j = 0; j < cols_; ++j) {
          double d = static_cast<C>(x[j]) - mean;
          sq += d * d;
        }
        double inv_std = 1.0 / std::sqrt((cols_ ? sq / cols_ : 0) + epsilon_);
        for (int64_t j = 0; j < cols_; ++j) {
          double v = (static_cast<C>(x[j]) - mean) * inv_std * static_cast<C>(scale[index(scale_index_, j)]);
          if (bias) v += static_cast<C>(bias[index(bias_index_, j)]);
          y[j] = static_cast<T>(static_cast<C>(v));
        }
        if (node.num_outputs > 1) store_at(out[1], r, mean);
        if (node.num_outputs > 2) store_at(out[2], r, inv_std);
      }
    });
  }

 private:
  // Scale and B broadcast (unidirectionally) to the normalized shape; an empty map means
  // they already have that shape and index j is element j.
  void map_params(const edgert_tensor& t, const Shape& normalized, const char* what,
                  std::vector<int64_t>& map) {
    if (t.dtype == EDGERT_DTYPE_UNDEFINED) fail(EDGERT_ERR_SHAPE, "%s is required", what);
    Shape s = shape_of(t);
    map.clear();
    if (numel(s) == numel(normalized) && s.size() <= normalized.size() &&
        std::equal(s.begin(), s.end(), normalized.end() - s.size()))
      return;
    if (s.size() > normalized.size() || broadcast_shapes({s, normalized}) != normalized)
      fail(EDGERT_ERR_SHAPE, "%s of shape %s does not broadcast to the normalized shape %s", what,
           shape_string(s).c_str(), shape_string(normalized).c_str());
    for (BroadcastIterator it(normalized, {s}); !it.done(); it.next()) map.push_back(it.offset(0));
  }
  static int64_t index(const std::vector<int64_t>& map, int64_t j) { return map.empty() ? j : map[j]; }

  double epsilon_ = 1e-5;
  int64_t rows_ = 0, cols_ = 0;
  bool has_bias_ = false;
  bool rows_kernel_ = false;  // the f32-layer-norm-rows tactic
  std::vector<int64_t> scale_index_, bias_index_;
};

// Local response normalization across channels.
class LrnOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, kFloats, [](auto) {}, "X");
    if (!attrs.has("size")) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'size' is required");
    size_ = attrs.get_int("size", 1);
    if (size_ < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "size must be >= 1, got %lld", static_cast<long long>(size_));
    alpha_ = attrs.get_float("alpha", 1e-4f);
    beta_ = attrs.get_float("beta", 0.75f);
    bias_ = attrs.get_float("bias", 1.0f);
    dims_ = ncs_of(in[0]);
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      const int64_t plane = dims_.spatial;
      const int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;  // floor / ceil of (size-1)/2
      for (int64_t n = 0; n < dims_.n; ++n)
        for (int64_t c = 0; c < dims_.c; ++c) {
          int64_t lo = c - before < 0 ? 0 : c - before;
          int64_t hi = c + after >= dims_.c ? dims_.c - 1 : c + after;
          for (int64_t s = 0; s < plane; ++s) {
            double square_sum = 0;
            for (int64_t k = lo; k <= hi; ++k) {
              double v = static_cast<C>(x[(n * dims_.c + k) * plane + s]);
              square_sum += v * v;
            }
            int64_t i = (n * dims_.c + c) * plane + s;
            double d = std::pow(bias_ + alpha_ / size_ * square_sum, beta_);
            y[i] = static_cast<T>(static_cast<C>(static_cast<C>(x[i]) / d));
          }
        }
    });
  }

 private:
  int64_t size_ = 1;
  double alpha_ = 1e-4, beta_ = 0.75, bias_ = 1.0;
  NCS dims_;
};

// (X - mean) / (sqrt(E[X^2] - mean^2) + 1e-9) over `axes`, as the ONNX function body defines it.
class MeanVarianceNormOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    dispatch(in[0].dtype, kFloats, [](auto) {}, "X");
    std::vector<int64_t> axes = Attributes(&node).get_ints("axes", {0, 2, 3});
    int rank = in[0].rank;
    bool reduced[EDGERT_MAX_RANK] = {};
    for (int64_t a : axes) reduced[normalize_axis(a, rank, "axes entry")] = true;
    int64_t strides[EDGERT_MAX_RANK];
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; --i) {
      strides[i] = stride;
      stride *= in[0].dims[i];
    }
    kept_rank_ = red_rank_ = 0;
    red_count_ = 1;
    for (int i = 0; i < rank; ++i) {
      if (reduced[i]) {
        red_dims_[red_rank_] = in[0].dims[i];
        red_strides_[red_rank_++] = strides[i];
        red_count_ *= in[0].dims[i];
      } else {
        kept_dims_[kept_rank_] = in[0].dims[i];
        kept_strides_[kept_rank_++] = strides[i];
      }
    }
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      strided_walk(kept_dims_, kept_strides_, kept_rank_, 0, [&](int64_t base) {
        double sum = 0, sq = 0;
        strided_walk(red_dims_, red_strides_, red_rank_, base, [&](int64_t i) {
          double v = static_cast<C>(x[i]);
          sum += v;
          sq += v * v;
        });
        double mean = red_count_ ? sum / red_count_ : 0;
        double var = red_count_ ? sq / red_count_ - mean * mean : 0;
        double denom = std::sqrt(var > 0 ? var : 0) + 1e-9;
        strided_walk(red_dims_, red_strides_, red_rank_, base, [&](int64_t i) {
          y[i] = static_cast<T>(static_cast<C>((static_cast<C>(x[i]) - mean) / denom));
        });
      });
    });
  }

 private:
  int kept_rank_ = 0, red_rank_ = 0;
  int64_t red_count_ = 1;
  int64_t kept_dims_[EDGERT_MAX_RANK] = {}, kept_strides_[EDGERT_MAX_RANK] = {};
  int64_t red_dims_[EDGERT_MAX_RANK] = {}, red_strides_[EDGERT_MAX_RANK] = {};
};

}  // namespace

void register_normalization_kernels(KernelRegistry& r) {
  r.add<BatchNormOp>("BatchNormalization", "ref-batch-normalization", batchnorm_supports);
  r.add<InstanceNormOp>("InstanceNormalization", "ref-instance-normalization");
  r.add<LayerNormOp>("LayerNormalization", "ref-layer-normalization", nullptr, layer_norm_tactics);
  r.add<LrnOp>("LRN", "ref-lrn");
  r.add<MeanVarianceNormOp>("MeanVarianceNormalization", "ref-mean-variance-normalization");
}

}  // namespace edgert::cpu

// Recurrent layers: RNN, LSTM, GRU.
//
// One template serves the three ops: they share inputs (X, W, R, B, sequence_lens, initial_h),
// attributes (direction, layout, activations, clip) and output layout, and differ only in the
// cell update. Reference kernel: plain loops, one batch row at a time, arithmetic in double.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "kernel.h"

namespace edgert::cpu {
namespace {

enum class CellKind { Rnn, Lstm, Gru };

// Number of gates (rows of W per direction) and activation functions per direction.
constexpr int64_t gate_count(CellKind k) { return k == CellKind::Rnn ? 1 : k == CellKind::Lstm ? 4 : 3; }
constexpr size_t activation_count(CellKind k) { return k == CellKind::Rnn ? 1 : k == CellKind::Lstm ? 3 : 2; }

struct Activation {
  enum Kind { Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu,
              Softsign, Softplus } kind = Tanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case Relu: return x > 0 || x != x ? x : 0;  // NaN stays NaN, as relu_of
      case Tanh: return std::tanh(x);
      case Sigmoid: return 1.0 / (1.0 + std::exp(-x));
      case Affine: return alpha * x + beta;
      case LeakyRelu: return x >= 0 ? x : alpha * x;
      case ThresholdedRelu: return x > alpha ? x : 0;
      case ScaledTanh: return alpha * std::tanh(beta * x);
      case HardSigmoid: return std::max(0.0, std::min(1.0, alpha * x + beta));
      case Elu: return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case Softsign: return x / (1 + std::fabs(x));
      case Softplus: return std::log1p(std::exp(x));
    }
    return x;
  }
};

// Parses activation names; alpha and beta lists are consumed in order by the functions that
// take them (as ONNX Runtime does), with the op-spec defaults where the lists run out.
std::vector<Activation> parse_activations(const std::vector<std::string>& names, const std::vector<float>& alphas,
                                          const std::vector<float>& betas) {
  struct Info { const char* name; Activation::Kind kind; int uses_alpha, uses_beta; double alpha, beta; };
  static const Info table[] = {
      {"relu", Activation::Relu, 0, 0, 0, 0},
      {"tanh", Activation::Tanh, 0, 0, 0, 0},
      {"sigmoid", Activation::Sigmoid, 0, 0, 0, 0},
      {"affine", Activation::Affine, 1, 1, 1.0, 0.0},
      {"leakyrelu", Activation::LeakyRelu, 1, 0, 0.01, 0},
      {"thresholdedrelu", Activation::ThresholdedRelu, 1, 0, 1.0, 0},
      {"scaledtanh", Activation::ScaledTanh, 1, 1, 1.0, 1.0},
      {"hardsigmoid", Activation::HardSigmoid, 1, 1, 0.2, 0.5},
      {"elu", Activation::Elu, 1, 0, 1.0, 0},
      {"softsign", Activation::Softsign, 0, 0, 0, 0},
      {"softplus", Activation::Softplus, 0, 0, 0, 0},
  };
  std::vector<Activation> out;
  size_t ai = 0, bi = 0;
  for (const std::string& raw : names) {
    std::string name;
    for (char c : raw) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const Info* info = nullptr;
    for (const Info& candidate : table)
      if (name == candidate.name) info = &candidate;
    if (!info) fail(EDGERT_ERR_UNSUPPORTED, "activation '%s' is not one of the ONNX RNN activations", raw.c_str());
    Activation a;
    a.kind = info->kind;
    a.alpha = info->alpha;
    a.beta = info->beta;
    if (info->uses_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (info->uses_beta && bi < betas.size()) a.beta = betas[bi++];
    out.push_back(a);
  }
  return out;
}

template <typename T>
double load(const T* p, int64_t i) {
  return static_cast<double>(static_cast<compute_t<T>>(p[i]));
}

template <typename T>
T to_type(double v) {
  return static_cast<T>(static_cast<compute_t<T>>(v));
}

template <CellKind K>
class RecurrentOp : public Op {
  static constexpr int64_t G = gate_count(K);
  static constexpr size_t kActs = activation_count(K);

 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    std::string direction = attrs.get_string("direction", "forward");
    if (direction == "forward") reverse_ = false, num_dir_ = 1;
    else if (direction == "reverse") reverse_ = true, num_dir_ = 1;
    else if (direction == "bidirectional") reverse_ = false, num_dir_ = 2;
    else fail(EDGERT_ERR_INVALID_ARGUMENT, "direction must be forward, reverse or bidirectional, got '%s'", direction.c_str());
    layout_ = node.opset >= 14 ? attrs.get_int("layout", 0) : 0;
    if (layout_ != 0 && layout_ != 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "layout must be 0 or 1, got %lld", static_cast<long long>(layout_));
    has_clip_ = attrs.has("clip");
    clip_ = attrs.get_float("clip", 0.f);
    input_forget_ = K == CellKind::Lstm && attrs.get_int("input_forget", 0) != 0;
    linear_before_reset_ = K == CellKind::Gru && attrs.get_int("linear_before_reset", 0) != 0;

    std::vector<std::string> names = attrs.get_strings("activations");
    if (names.empty()) {
      if (K == CellKind::Rnn) names = {"Tanh"};
      else if (K == CellKind::Lstm) names = {"Sigmoid", "Tanh", "Tanh"};
      else names = {"Sigmoid", "Tanh"};
    }
    // A bidirectional node that lists the functions once uses them for both directions.
    if (num_dir_ == 2 && names.size() == kActs) {
      std::vector<std::string> once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    if (names.size() != kActs * static_cast<size_t>(num_dir_))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "activations lists %zu functions, expected %zu", names.size(),
           kActs * static_cast<size_t>(num_dir_));
    acts_ = parse_activations(names, attrs.get_floats("activation_alpha"), attrs.get_floats("activation_beta"));

    const edgert_tensor& x = in[0];
    const edgert_tensor& w = in[1];
    const edgert_tensor& r = in[2];
    dispatch(x.dtype, kFloats, [](auto) {}, "X");
    if (x.rank != 3) fail(EDGERT_ERR_SHAPE, "X must have rank 3, found %s", shape_string(shape_of(x)).c_str());
    seq_ = layout_ == 0 ? x.dims[0] : x.dims[1];
    batch_ = layout_ == 0 ? x.dims[1] : x.dims[0];
    input_size_ = x.dims[2];
    if (r.rank != 3) fail(EDGERT_ERR_SHAPE, "R must have rank 3, found %s", shape_string(shape_of(r)).c_str());
    hidden_ = attrs.get_int("hidden_size", r.dims[2]);
    const int64_t H = hidden_;
    auto expect = [&](const edgert_tensor& t, const char* what, Shape want) {
      if (t.dtype != x.dtype)
        fail(EDGERT_ERR_SHAPE, "%s has dtype %s, X has %s", what, dtype_name(t.dtype), dtype_name(x.dtype));
      if (shape_of(t) != want)
        fail(EDGERT_ERR_SHAPE, "%s has shape %s, expected %s", what, shape_string(shape_of(t)).c_str(),
             shape_string(want).c_str());
    };
    expect(w, "W", {num_dir_, G * H, input_size_});
    expect(r, "R", {num_dir_, G * H, H});
    auto present = [&](int i) { return node.num_inputs > i && is_present(in[i]); };
    has_b_ = present(3);
    if (has_b_) expect(in[3], "B", {num_dir_, 2 * G * H});
    has_lens_ = present(4);
    if (has_lens_) {
      if (in[4].dtype != EDGERT_DTYPE_INT32 && in[4].dtype != EDGERT_DTYPE_INT64)
        fail(EDGERT_ERR_SHAPE, "sequence_lens must be int32, found %s", dtype_name(in[4].dtype));
      if (shape_of(in[4]) != Shape{batch_})
        fail(EDGERT_ERR_SHAPE, "sequence_lens has shape %s, expected [%lld]", shape_string(shape_of(in[4])).c_str(),
             static_cast<long long>(batch_));
    }
    Shape state_shape = layout_ == 0 ? Shape{num_dir_, batch_, H} : Shape{batch_, num_dir_, H};
    has_h0_ = present(5);
    if (has_h0_) expect(in[5], "initial_h", state_shape);
    has_c0_ = K == CellKind::Lstm && present(6);
    if (has_c0_) expect(in[6], "initial_c", state_shape);
    has_p_ = K == CellKind::Lstm && present(7);
    if (has_p_) expect(in[7], "P", {num_dir_, 3 * H});

    Shape y_shape = layout_ == 0 ? Shape{seq_, num_dir_, batch_, H} : Shape{batch_, seq_, num_dir_, H};
    int32_t max_outputs = K == CellKind::Lstm ? 3 : 2;
    if (node.num_outputs > max_outputs)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "has %d outputs, at most %d expected", node.num_outputs, max_outputs);
    for (int32_t i = 0; i < node.num_outputs; ++i) set_output(out[i], x.dtype, i == 0 ? y_shape : state_shape);

    // h, c, next h, the gate pre-activations of one batch row and (GRU) its reset gate.
    info.workspace_bytes = static_cast<size_t>(4 * H + G * H) * sizeof(double);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      run<T>(node, in, out, static_cast<double*>(workspace));
    });
  }

 private:
  // Index of state [d, b, :] in initial_h / Y_h / Y_c, depending on the layout.
  int64_t state_offset(int64_t d, int64_t b) const {
    return (layout_ == 0 ? d * batch_ + b : b * num_dir_ + d) * hidden_;
  }
  int64_t y_offset(int64_t t, int64_t d, int64_t b) const {
    return (layout_ == 0 ? (t * num_dir_ + d) * batch_ + b : (b * seq_ + t) * num_dir_ + d) * hidden_;
  }
  double clip(double v) const {
    return has_clip_ ? std::max(-static_cast<double>(clip_), std::min(static_cast<double>(clip_), v)) : v;
  }

  template <typename T>
  void run(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, double* ws) {
    const int64_t H = hidden_, I = input_size_;
    const T* X = data_as<T>(in[0]);
    const T* W = data_as<T>(in[1]);
    const T* R = data_as<T>(in[2]);
    const T* B = has_b_ ? data_as<T>(in[3]) : nullptr;
    const T* H0 = has_h0_ ? data_as<T>(in[5]) : nullptr;
    const T* C0 = has_c0_ ? data_as<T>(in[6]) : nullptr;
    const T* P = has_p_ ? data_as<T>(in[7]) : nullptr;
    auto output = [&](int i) -> T* { return node.num_outputs > i ? data_as<T>(out[i]) : nullptr; };
    T* Y = output(0);
    T* Yh = output(1);
    T* Yc = K == CellKind::Lstm ? output(2) : nullptr;

    double* h = ws;
    double* c = h + H;
    double* h_next = c + H;
    double* gates = h_next + H;

    for (int64_t d = 0; d < num_dir_; ++d) {
      const bool backward = reverse_ || d == 1;
      const T* Wd = W + d * G * H * I;
      const T* Rd = R + d * G * H * H;
      const Activation* act = &acts_[static_cast<size_t>(d) * kActs];
      for (int64_t b = 0; b < batch_; ++b) {
        int64_t len = seq_;
        if (has_lens_) {
          len = in[4].dtype == EDGERT_DTYPE_INT32 ? data_as<int32_t>(in[4])[b] : data_as<int64_t>(in[4])[b];
          len = std::max<int64_t>(0, std::min(len, seq_));
        }
        for (int64_t j = 0; j < H; ++j) {
          h[j] = H0 ? load(H0, state_offset(d, b) + j) : 0.0;
          c[j] = C0 ? load(C0, state_offset(d, b) + j) : 0.0;
        }
        for (int64_t step = 0; step < len; ++step) {
          const int64_t t = backward ? len - 1 - step : step;
          const T* xt = X + (layout_ == 0 ? t * batch_ + b : b * seq_ + t) * I;
          // gates = W x + Wb (+ R h + Rb, except GRU's hidden gate which needs the reset gate).
          for (int64_t g = 0; g < G; ++g) {
            for (int64_t j = 0; j < H; ++j) {
              const int64_t row = g * H + j;
              double acc = B ? load(B, d * 2 * G * H + row) : 0.0;
              for (int64_t k = 0; k < I; ++k) acc += load(Wd, row * I + k) * load(xt, k);
              const bool gru_hidden = K == CellKind::Gru && g == 2;
              if (!gru_hidden) {
                if (B) acc += load(B, d * 2 * G * H + G * H + row);
                for (int64_t k = 0; k < H; ++k) acc += load(Rd, row * H + k) * h[k];
              }
              gates[row] = acc;
            }
          }
          step_cell(act, gates, h, c, h_next, Rd, B ? B + d * 2 * G * H + G * H : nullptr,
                    P ? P + d * 3 * H : nullptr);
          for (int64_t j = 0; j < H; ++j) h[j] = h_next[j];
          if (Y) for (int64_t j = 0; j < H; ++j) Y[y_offset(t, d, b) + j] = to_type<T>(h[j]);
        }
        // Steps past this row's sequence length produce zeros.
        if (Y)
          for (int64_t t = len; t < seq_; ++t)
            for (int64_t j = 0; j < H; ++j) Y[y_offset(t, d, b) + j] = to_type<T>(0.0);
        if (Yh) for (int64_t j = 0; j < H; ++j) Yh[state_offset(d, b) + j] = to_type<T>(h[j]);
        if (Yc) for (int64_t j = 0; j < H; ++j) Yc[state_offset(d, b) + j] = to_type<T>(c[j]);
      }
    }
  }

  // One cell update of one batch row: reads h (and c), writes h_next (and updates c in place).
  template <typename T>
  void step_cell(const Activation* act, double* gates, const double* h, double* c, double* h_next, const T* Rd,
                 const T* Rb, const T* P) {
    const int64_t H = hidden_;
    if constexpr (K == CellKind::Rnn) {
      for (int64_t j = 0; j < H; ++j) h_next[j] = act[0](clip(gates[j]));
    } else if constexpr (K == CellKind::Lstm) {
      // Gate order in W, R, B: input, output, forget, cell. P holds input, output, forget.
      const double* gi = gates;
      const double* go = gates + H;
      const double* gf = gates + 2 * H;
      const double* gc = gates + 3 * H;
      for (int64_t j = 0; j < H; ++j) {
        double i_pre = gi[j] + (P ? load(P, j) * c[j] : 0.0);
        double i = act[0](clip(i_pre));
        double f;
        if (input_forget_) {
          f = 1.0 - i;
        } else {
          double f_pre = gf[j] + (P ? load(P, 2 * H + j) * c[j] : 0.0);
          f = act[0](clip(f_pre));
        }
        double cand = act[1](clip(gc[j]));
        double c_new = f * c[j] + i * cand;
        double o_pre = go[j] + (P ? load(P, H + j) * c_new : 0.0);
        double o = act[0](clip(o_pre));
        c[j] = c_new;
        h_next[j] = o * act[2](c_new);
      }
    } else {
      // Gate order: update (z), reset (r), hidden (h). gates[2H..3H) holds W x + Wb only.
      const double* gz = gates;
      const double* gr = gates + H;
      const double* gh = gates + 2 * H;
      double* r_all = gates + 3 * H;  // reset gate of every unit: r (.) h needs all of them
      for (int64_t j = 0; j < H; ++j) r_all[j] = act[0](clip(gr[j]));
      for (int64_t j = 0; j < H; ++j) {
        double r = r_all[j];
        double rec = 0.0;  // the recurrent part of the hidden gate
        if (linear_before_reset_) {
          double lin = Rb ? load(Rb, 2 * H + j) : 0.0;
          for (int64_t k = 0; k < H; ++k) lin += load(Rd, (2 * H + j) * H + k) * h[k];
          rec = r * lin;
        } else {
          for (int64_t k = 0; k < H; ++k) rec += load(Rd, (2 * H + j) * H + k) * (r_all[k] * h[k]);
          if (Rb) rec += load(Rb, 2 * H + j);
        }
        double z = act[0](clip(gz[j]));
        double cand = act[1](clip(gh[j] + rec));
        h_next[j] = (1.0 - z) * cand + z * h[j];
      }
    }
  }

  bool reverse_ = false;
  int64_t num_dir_ = 1, layout_ = 0, hidden_ = 0, seq_ = 0, batch_ = 0, input_size_ = 0;
  bool has_clip_ = false, input_forget_ = false, linear_before_reset_ = false;
  float clip_ = 0.f;
  bool has_b_ = false, has_lens_ = false, has_h0_ = false, has_c0_ = false, has_p_ = false;
  std::vector<Activation> acts_;
};

}  // namespace

void register_rnn_kernels(KernelRegistry& r) {
  r.add<RecurrentOp<CellKind::Rnn>>("RNN", "ref-rnn");
  r.add<RecurrentOp<CellKind::Lstm>>("LSTM", "ref-lstm");
  r.add<RecurrentOp<CellKind::Gru>>("GRU", "ref-gru");
}

}  // namespace edgert::cpu

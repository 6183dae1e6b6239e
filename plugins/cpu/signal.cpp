// Signal processing: DFT, STFT, the Hann/Hamming/Blackman windows and MelWeightMatrix.
//
// Reference kernels: naive O(N^2) transforms with a twiddle table, all arithmetic in double so
// results match numpy's FFT to float32 precision. (The node tests of ONNX 1.22 computed the
// complex64 inverse in single precision, those of 1.12 in double: where the exact result is
// zero the two differ by float32 rounding noise, and a double transform matches the 1.12 data.)
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel.h"

namespace edgert::cpu {
namespace {

constexpr double kPi = 3.14159265358979323846;

template <typename T>
double load(const T* p, int64_t i) {
  return static_cast<double>(static_cast<compute_t<T>>(p[i]));
}

template <typename T>
void store(T* p, int64_t i, double v) {
  p[i] = static_cast<T>(static_cast<compute_t<T>>(v));
}

// cos/sin of 2*pi*m/n for m in [0, n): indexing by (k*j) % n keeps angles small and exact.
void fill_twiddles(double* table, int64_t n) {
  for (int64_t m = 0; m < n; ++m) {
    double angle = 2.0 * kPi * static_cast<double>(m) / static_cast<double>(n);
    table[2 * m] = std::cos(angle);
    table[2 * m + 1] = std::sin(angle);
  }
}

bool present(const edgert_node& node, const edgert_tensor* in, int i) {
  return node.num_inputs > i && is_present(in[i]);
}

// DFT (opset 17: axis attribute; opset 20: axis as input 2, default -2). With inverse and
// onesided both set it is the inverse of the one-sided transform (numpy's irfft): the input
// holds bins 0 .. n/2 of a Hermitian spectrum, the output is the real signal [..., n, ..., 1],
// and n defaults to 2 * (bins - 1).
class DftOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    const edgert_tensor& x = in[0];
    dispatch(x.dtype, kFloats, [](auto) {}, "input");
    rank_ = x.rank;
    if (rank_ < 2 || (x.dims[rank_ - 1] != 1 && x.dims[rank_ - 1] != 2))
      fail(EDGERT_ERR_SHAPE, "input must be [batch, ..., 1 or 2], found %s", shape_string(shape_of(x)).c_str());
    inverse_ = attrs.get_int("inverse", 0) != 0;
    onesided_ = attrs.get_int("onesided", 0) != 0;
    info.data_dependent = 0;
    int64_t axis = 1;
    if (node.opset >= 20) {
      axis = -2;
      if (present(node, in, 2)) {
        axis = read_ints(in[2], "axis").at(0);
        info.data_dependent = 1;
      }
    } else {
      axis = attrs.get_int("axis", 1);
    }
    if (axis < 0) axis += rank_;
    if (axis < 0 || axis > rank_ - 2)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "axis %lld is out of range [0, %d] for an input of rank %d",
           static_cast<long long>(axis), rank_ - 2, rank_);
    axis_ = axis;
    inverse_real_ = inverse_ && onesided_;
    length_ = inverse_real_ ? 2 * (x.dims[axis_] - 1) : x.dims[axis_];
    if (present(node, in, 1)) {
      std::vector<int64_t> v = read_ints(in[1], "dft_length");
      if (v.size() != 1) fail(EDGERT_ERR_SHAPE, "dft_length must hold one value, it holds %zu", v.size());
      length_ = v[0];
      info.data_dependent = 1;
      if (length_ < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "dft_length must be positive, got %lld", static_cast<long long>(length_));
    }
    if (inverse_real_ && length_ < 1)
      fail(EDGERT_ERR_SHAPE, "the inverse one-sided DFT of %s needs dft_length: its %lld bins give a signal length of %lld",
           shape_string(shape_of(x)).c_str(), static_cast<long long>(x.dims[axis_]), static_cast<long long>(length_));
    Shape shape = shape_of(x);
    shape[axis_] = inverse_real_ || !onesided_ ? length_ : length_ / 2 + 1;
    shape[rank_ - 1] = inverse_real_ ? 1 : 2;
    set_output(out[0], x.dtype, shape);
    info.workspace_bytes = static_cast<size_t>(2 * length_) * sizeof(double);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      Lines lines;
      for (int64_t i = 0; i < axis_; ++i) lines.outer *= in[0].dims[i];
      for (int64_t i = axis_ + 1; i < rank_ - 1; ++i) lines.inner *= in[0].dims[i];
      lines.n_in = in[0].dims[axis_];
      lines.comps = in[0].dims[rank_ - 1];
      lines.n_out = out[0].dims[axis_];
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      double* tw = static_cast<double*>(workspace);
      fill_twiddles(tw, length_);
      if (inverse_real_) inverse_real_transform(lines, x, y, tw);
      else transform_in_double(lines, x, y, tw);
    });
  }

 private:
  // The input is `outer` x n_in x `inner` x comps, the output outer x n_out x inner x (1 or 2):
  // outer * inner independent lines along the axis.
  struct Lines {
    int64_t outer = 1, inner = 1, n_in = 0, n_out = 0, comps = 1;
    int64_t in_index(int64_t o, int64_t j, int64_t i) const { return ((o * n_in + j) * inner + i) * comps; }
    int64_t out_index(int64_t o, int64_t k, int64_t i, int64_t out_comps) const {
      return ((o * n_out + k) * inner + i) * out_comps;
    }
  };

  template <typename T>
  void transform_in_double(const Lines& l, const T* x, T* y, const double* tw) const {
    const int64_t n_used = std::min(l.n_in, length_);  // shorter input: zero padding
    const double sign = inverse_ ? 1.0 : -1.0;
    const double scale = inverse_ ? 1.0 / static_cast<double>(length_) : 1.0;
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t i = 0; i < l.inner; ++i)
        for (int64_t k = 0; k < l.n_out; ++k) {
          double re = 0, im = 0;
          for (int64_t j = 0; j < n_used; ++j) {
            const int64_t src = l.in_index(o, j, i);
            const double xr = load(x, src), xi = l.comps == 2 ? load(x, src + 1) : 0.0;
            const int64_t m = (k * j) % length_;
            const double c = tw[2 * m], s = sign * tw[2 * m + 1];
            re += xr * c - xi * s;
            im += xr * s + xi * c;
          }
          const int64_t dst = l.out_index(o, k, i, 2);
          store(y, dst, re * scale);
          store(y, dst + 1, im * scale);
        }
  }

  // x_j = (1/n) sum over all n bins of X_k e^{2 pi i jk/n}, the bins above n/2 being the
  // conjugates of those below. Bin 0 and, for even n, bin n/2 count once and only by their real
  // part (a Hermitian spectrum has them real); the others count twice, for themselves and their
  // conjugates. Bins the input lacks are zero, bins beyond n/2 are ignored, as numpy does.
  template <typename T>
  void inverse_real_transform(const Lines& l, const T* x, T* y, const double* tw) const {
    const int64_t bins = std::min(l.n_in, length_ / 2 + 1);
    const double scale = 1.0 / static_cast<double>(length_);
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t i = 0; i < l.inner; ++i)
        for (int64_t j = 0; j < length_; ++j) {
          double sum = 0;
          for (int64_t k = 0; k < bins; ++k) {
            const int64_t src = l.in_index(o, k, i);
            const bool self_conjugate = k == 0 || 2 * k == length_;
            const double xr = load(x, src), xi = l.comps == 2 && !self_conjugate ? load(x, src + 1) : 0.0;
            const int64_t m = (k * j) % length_;
            sum += (self_conjugate ? 1.0 : 2.0) * (xr * tw[2 * m] - xi * tw[2 * m + 1]);
          }
          store(y, l.out_index(o, j, i, 1), sum * scale);
        }
  }

  int32_t rank_ = 0;
  int64_t axis_ = 1, length_ = 0;
  bool inverse_ = false, onesided_ = false;
  bool inverse_real_ = false;  // inverse of the one-sided transform: real output
};

// STFT: inputs signal [batch, length, 1 or 2], frame_step, window?, frame_length?.
class StftOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    const edgert_tensor& x = in[0];
    dispatch(x.dtype, kFloats, [](auto) {}, "signal");
    if (x.rank != 3 || (x.dims[2] != 1 && x.dims[2] != 2))
      fail(EDGERT_ERR_SHAPE, "signal must be [batch, length, 1 or 2], found %s", shape_string(shape_of(x)).c_str());
    onesided_ = Attributes(&node).get_int("onesided", 1) != 0;
    step_ = static_cast<int64_t>(read_scalar(in[1], "frame_step"));
    has_window_ = present(node, in, 2);
    frame_ = -1;
    if (has_window_) {
      if (in[2].rank != 1) fail(EDGERT_ERR_SHAPE, "window must have rank 1, found %s", shape_string(shape_of(in[2])).c_str());
      if (in[2].dtype != x.dtype)
        fail(EDGERT_ERR_SHAPE, "window has dtype %s, signal has %s", dtype_name(in[2].dtype), dtype_name(x.dtype));
      frame_ = in[2].dims[0];
    }
    if (present(node, in, 3)) {
      int64_t length = static_cast<int64_t>(read_scalar(in[3], "frame_length"));
      if (has_window_ && length != frame_)
        fail(EDGERT_ERR_SHAPE, "frame_length %lld does not match the window's length %lld", static_cast<long long>(length),
             static_cast<long long>(frame_));
      frame_ = length;
    }
    if (frame_ < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs a window or a positive frame_length");
    if (step_ < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "frame_step must be positive, got %lld", static_cast<long long>(step_));
    if (frame_ > x.dims[1])
      fail(EDGERT_ERR_SHAPE, "frame_length %lld exceeds the signal length %lld", static_cast<long long>(frame_),
           static_cast<long long>(x.dims[1]));
    const int64_t frames = (x.dims[1] - frame_) / step_ + 1;
    const int64_t bins = onesided_ ? frame_ / 2 + 1 : frame_;
    set_output(out[0], x.dtype, {x.dims[0], frames, bins, 2});
    info.data_dependent = 1;  // frame_step and frame_length values decide the shape
    info.workspace_bytes = static_cast<size_t>(2 * frame_) * sizeof(double);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    double* tw = static_cast<double*>(workspace);
    fill_twiddles(tw, frame_);
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      const int64_t batch = in[0].dims[0], length = in[0].dims[1], comps = in[0].dims[2];
      const int64_t frames = out[0].dims[1], bins = out[0].dims[2];
      const T* win = has_window_ ? data_as<T>(in[2]) : nullptr;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t f = 0; f < frames; ++f)
          for (int64_t k = 0; k < bins; ++k) {
            double re = 0, im = 0;
            for (int64_t j = 0; j < frame_; ++j) {
              const int64_t src = (b * length + f * step_ + j) * comps;
              const double w = win ? load(win, j) : 1.0;
              const double xr = load(x, src) * w, xi = comps == 2 ? load(x, src + 1) * w : 0.0;
              const int64_t m = (k * j) % frame_;
              const double c = tw[2 * m], s = -tw[2 * m + 1];
              re += xr * c - xi * s;
              im += xr * s + xi * c;
            }
            const int64_t dst = ((b * frames + f) * bins + k) * 2;
            store(y, dst, re);
            store(y, dst + 1, im);
          }
    });
  }

 private:
  bool onesided_ = true, has_window_ = false;
  int64_t step_ = 1, frame_ = 0;
};

enum class WindowKind { Hann, Hamming, Blackman };

// The output dtype named by an output_datatype attribute (ONNX TensorProto numbering).
edgert_dtype output_datatype(const Attributes& attrs) {
  auto dtype = static_cast<edgert_dtype>(attrs.get_int("output_datatype", EDGERT_DTYPE_FLOAT32));
  dispatch(dtype, kNumeric, [](auto) {}, "output_datatype");
  return dtype;
}

template <WindowKind K>
class WindowOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    dtype_ = output_datatype(attrs);
    periodic_ = attrs.get_int("periodic", 1) != 0;
    size_ = static_cast<int64_t>(read_scalar(in[0], "size"));
    if (size_ < 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "size must not be negative, got %lld", static_cast<long long>(size_));
    set_output(out[0], dtype_, {size_});
    info.data_dependent = 1;
  }

  void execute(const edgert_node&, const edgert_tensor*, edgert_tensor* out, void*) override {
    // Periodic windows divide by N (one period of a longer window), symmetric ones by N - 1.
    const double n = static_cast<double>(periodic_ ? size_ : size_ - 1);
    dispatch(dtype_, kNumeric, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* y = data_as<T>(out[0]);
      for (int64_t i = 0; i < size_; ++i) {
        const double phase = n > 0 ? 2.0 * kPi * static_cast<double>(i) / n : 0.0;
        double v;
        if constexpr (K == WindowKind::Hann) v = 0.5 - 0.5 * std::cos(phase);
        else if constexpr (K == WindowKind::Hamming) v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(phase);
        else v = 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2.0 * phase);
        store(y, i, v);
      }
    });
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  bool periodic_ = true;
  int64_t size_ = 0;
};

// MelWeightMatrix: [dft_length/2 + 1, num_mel_bins] triangular filters, as ONNX Runtime
// computes them (mel_step divides the range into num_mel_bins + 2 steps, per the spec).
class MelWeightMatrixOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    dtype_ = output_datatype(Attributes(&node));
    mel_bins_ = static_cast<int64_t>(read_scalar(in[0], "num_mel_bins"));
    dft_length_ = static_cast<int64_t>(read_scalar(in[1], "dft_length"));
    sample_rate_ = read_scalar(in[2], "sample_rate");
    lower_ = read_scalar(in[3], "lower_edge_hertz");
    upper_ = read_scalar(in[4], "upper_edge_hertz");
    if (mel_bins_ < 0 || dft_length_ < 1 || sample_rate_ <= 0)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "num_mel_bins %lld, dft_length %lld, sample_rate %g: expected >= 0, >= 1, > 0",
           static_cast<long long>(mel_bins_), static_cast<long long>(dft_length_), sample_rate_);
    set_output(out[0], dtype_, {dft_length_ / 2 + 1, mel_bins_});
    info.data_dependent = 1;
    info.workspace_bytes = static_cast<size_t>(mel_bins_ + 2) * sizeof(int64_t);
  }

  void execute(const edgert_node&, const edgert_tensor*, edgert_tensor* out, void* workspace) override {
    auto hz_to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
    auto mel_to_hz = [](double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); };
    const int64_t spectrogram_bins = dft_length_ / 2 + 1;
    int64_t* edges = static_cast<int64_t*>(workspace);
    const double low_mel = hz_to_mel(lower_), high_mel = hz_to_mel(upper_);
    const double mel_step = (high_mel - low_mel) / static_cast<double>(mel_bins_ + 2);
    for (int64_t i = 0; i < mel_bins_ + 2; ++i) {
      const double hz = mel_to_hz(low_mel + mel_step * static_cast<double>(i));
      edges[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft_length_ + 1) * hz / sample_rate_));
    }
    dispatch(dtype_, kNumeric, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* y = data_as<T>(out[0]);
      for (int64_t i = 0; i < spectrogram_bins * mel_bins_; ++i) store(y, i, 0.0);
      auto put = [&](int64_t row, int64_t col, double v) {
        if (row >= 0 && row < spectrogram_bins) store(y, row * mel_bins_ + col, v);
      };
      for (int64_t i = 0; i < mel_bins_; ++i) {
        const int64_t low = edges[i], center = edges[i + 1], high = edges[i + 2];
        if (center == low) {
          put(center, i, 1.0);
        } else {
          for (int64_t j = low; j <= center; ++j)
            put(j, i, static_cast<double>(j - low) / static_cast<double>(center - low));
        }
        for (int64_t j = center; j < high; ++j)
          put(j, i, static_cast<double>(high - j) / static_cast<double>(high - center));
      }
    });
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  int64_t mel_bins_ = 0, dft_length_ = 0;
  double sample_rate_ = 1, lower_ = 0, upper_ = 0;
};

}  // namespace

void register_signal_kernels(KernelRegistry& r) {
  r.add<DftOp>("DFT", "ref-dft");
  r.add<StftOp>("STFT", "ref-stft");
  r.add<WindowOp<WindowKind::Hann>>("HannWindow", "ref-hann-window");
  r.add<WindowOp<WindowKind::Hamming>>("HammingWindow", "ref-hamming-window");
  r.add<WindowOp<WindowKind::Blackman>>("BlackmanWindow", "ref-blackman-window");
  r.add<MelWeightMatrixOp>("MelWeightMatrix", "ref-mel-weight-matrix");
}

}  // namespace edgert::cpu

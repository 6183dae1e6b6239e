// Sampling an image at computed positions: GridSample (opset 16 on 4-D, opset 20 on any
// number of spatial dimensions) and AffineGrid (opset 20), which makes the grid an affine
// transform gives.
//
// GridSample follows the ONNX reference (which follows PyTorch's grid_sampler): a grid value in
// [-1, 1] maps to a pixel coordinate, out-of-range coordinates are clamped or reflected by the
// padding mode, and interpolation is separable, so an N-D sample is the weighted sum over the
// product of each axis's taps (1 nearest, 2 linear, 4 cubic).
#include <cmath>
#include <string>

#include "kernel.h"

namespace edgert::cpu {
namespace {

enum class GridMode { Linear, Nearest, Cubic };
enum class GridPadding { Zeros, Border, Reflection };

// Opset 16 spells the modes bilinear and bicubic; opset 20 linear and cubic.
bool parse_grid_mode(const std::string& s, GridMode& out) {
  if (s == "bilinear" || s == "linear") out = GridMode::Linear;
  else if (s == "nearest") out = GridMode::Nearest;
  else if (s == "bicubic" || s == "cubic") out = GridMode::Cubic;
  else return false;
  return true;
}

bool parse_grid_padding(const std::string& s, GridPadding& out) {
  if (s == "zeros") out = GridPadding::Zeros;
  else if (s == "border") out = GridPadding::Border;
  else if (s == "reflection") out = GridPadding::Reflection;
  else return false;
  return true;
}

constexpr int kMaxSpatial = EDGERT_MAX_RANK - 2;
constexpr int kMaxTaps = 4;

class GridSampleOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    std::string mode = attrs.get_string("mode", node.opset >= 20 ? "linear" : "bilinear");
    if (!parse_grid_mode(mode, mode_))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "mode must be linear (bilinear), nearest or cubic (bicubic), got '%s'",
           mode.c_str());
    std::string padding = attrs.get_string("padding_mode", "zeros");
    if (!parse_grid_padding(padding, padding_))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "padding_mode must be zeros, border or reflection, got '%s'", padding.c_str());
    align_corners_ = attrs.get_int("align_corners", 0) != 0;
    dispatch(in[0].dtype, kFloats, [](auto) {}, "X");
    dispatch(in[1].dtype, kFloats, [](auto) {}, "grid");
    const edgert_tensor& x = in[0];
    const edgert_tensor& grid = in[1];
    if (x.rank < 3 || x.rank - 2 > kMaxSpatial)
      fail(EDGERT_ERR_SHAPE, "X must be [N, C, D1, ..., Dr] with 1 <= r <= %d, its shape is %s", kMaxSpatial,
           shape_string(shape_of(x)).c_str());
    spatial_ = x.rank - 2;
    if (node.opset < 20 && spatial_ != 2)
      fail(EDGERT_ERR_SHAPE, "GridSample-%d takes 4-D X only, its shape is %s", node.opset,
           shape_string(shape_of(x)).c_str());
    if (grid.rank != x.rank || grid.dims[0] != x.dims[0] || grid.dims[grid.rank - 1] != spatial_)
      fail(EDGERT_ERR_SHAPE, "grid has shape %s, expected [%lld, out spatial (%d dims)..., %d]",
           shape_string(shape_of(grid)).c_str(), static_cast<long long>(x.dims[0]), spatial_, spatial_);
    Shape shape = {x.dims[0], x.dims[1]};
    for (int i = 1; i <= spatial_; ++i) shape.push_back(grid.dims[i]);
    set_output(out[0], x.dtype, shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch_only<kFloats>(in[1].dtype, [&](auto grid_tag) {
      using G = typename decltype(grid_tag)::type;
      dispatch_only<kFloats>(in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        run(data_as<const T>(in[0]), data_as<const G>(in[1]), data_as<T>(out[0]), in[0], out[0]);
      }, "X");
    }, "grid");
  }

 private:
  // Grid value in [-1, 1] to pixel coordinate, in the grid's precision (float32 for float32
  // grids), as the reference does: that decides on which side of .5 a nearest sample falls.
  template <typename C>
  C unnormalize(C c, int64_t size) const {
    const C s = static_cast<C>(size);
    return align_corners_ ? (c + C(1)) / C(2) * (s - C(1)) : ((c + C(1)) * s - C(1)) / C(2);
  }

  // Reflects c into [low, high] by the near border until it is inside.
  static double reflect(double c, double low, double high) {
    const double span = high - low;
    if (span <= 0) return low;
    if (c < low) {
      double d = low - c;
      int64_t flips = static_cast<int64_t>(d / span);
      double r = d - static_cast<double>(flips) * span;
      return flips % 2 == 0 ? low + r : high - r;
    }
    if (c > high) {
      double d = c - high;
      int64_t flips = static_cast<int64_t>(d / span);
      double r = d - static_cast<double>(flips) * span;
      return flips % 2 == 0 ? high - r : low + r;
    }
    return c;
  }

  // The coordinate range padding refers to: pixel centres with align_corners, else pixel edges.
  double low(int64_t) const { return align_corners_ ? 0.0 : -0.5; }
  double high(int64_t size) const { return align_corners_ ? static_cast<double>(size) - 1 : static_cast<double>(size) - 0.5; }

  // The element index a tap at integer position i reads, or -1 for a zero (outside, zeros mode).
  int64_t tap_index(int64_t i, int64_t size) const {
    if (padding_ == GridPadding::Zeros) return i >= 0 && i < size ? i : -1;
    if (padding_ == GridPadding::Border) return i < 0 ? 0 : (i >= size ? size - 1 : i);
    int64_t r = static_cast<int64_t>(reflect(static_cast<double>(i), low(size), high(size)));
    return r < 0 ? 0 : (r >= size ? size - 1 : r);
  }

  static void cubic_weights(double t, double w[4]) {
    const double a = -0.75;
    auto near = [a](double v) { return ((a + 2) * v - (a + 3)) * v * v + 1; };        // |v| <= 1
    auto far = [a](double v) { return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a; };   // 1 < |v| < 2
    w[0] = far(t + 1);
    w[1] = near(t);
    w[2] = near(1 - t);
    w[3] = far(2 - t);
  }

  // Taps of one axis for pixel coordinate c: element indices (-1: zero) and weights.
  int axis_taps(double c, int64_t size, int64_t index[kMaxTaps], double weight[kMaxTaps]) const {
    if (mode_ == GridMode::Nearest) c = std::nearbyint(c);  // ties to even, as PyTorch and the reference
    if (c < low(size) || c > high(size)) {
      if (padding_ == GridPadding::Border) c = std::fmin(std::fmax(c, 0.0), static_cast<double>(size - 1));
      else if (padding_ == GridPadding::Reflection) c = reflect(c, low(size), high(size));
    }
    if (mode_ == GridMode::Nearest) {
      index[0] = tap_index(static_cast<int64_t>(c), size);
      weight[0] = 1;
      return 1;
    }
    const double base = std::floor(c), t = c - base;
    const int64_t i0 = static_cast<int64_t>(base);
    if (mode_ == GridMode::Linear) {
      index[0] = tap_index(i0, size);
      index[1] = tap_index(i0 + 1, size);
      weight[0] = 1 - t;
      weight[1] = t;
      return 2;
    }
    cubic_weights(t, weight);
    for (int k = 0; k < 4; ++k) index[k] = tap_index(i0 - 1 + k, size);
    return 4;
  }

  template <typename T, typename G>
  void run(const T* x, const G* grid, T* y, const edgert_tensor& xt, const edgert_tensor& yt) const {
    using GC = compute_t<G>;
    const int r = spatial_;
    const int64_t batch = xt.dims[0], channels = xt.dims[1];
    int64_t in_size = 1, out_size = 1;
    for (int d = 0; d < r; ++d) {
      in_size *= xt.dims[2 + d];
      out_size *= yt.dims[2 + d];
    }
    int64_t index[kMaxSpatial][kMaxTaps];
    double weight[kMaxSpatial][kMaxTaps];
    int taps[kMaxSpatial];
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t o = 0; o < out_size; ++o) {
        // The grid's last axis lists coordinates innermost first (x for W, then y for H, ...).
        const G* g = grid + (b * out_size + o) * r;
        for (int d = 0; d < r; ++d) {
          const int64_t size = xt.dims[2 + d];
          const double c = static_cast<double>(unnormalize(static_cast<GC>(g[r - 1 - d]), size));
          taps[d] = axis_taps(c, size, index[d], weight[d]);
        }
        for (int64_t ch = 0; ch < channels; ++ch) {
          const T* plane = x + (b * channels + ch) * in_size;
          double sum = 0;
          int k[kMaxSpatial] = {};
          while (true) {
            double w = 1;
            int64_t at = 0;
            bool zero = false;
            for (int d = 0; d < r; ++d) {
              const int64_t i = index[d][k[d]];
              if (i < 0) zero = true;
              at = at * xt.dims[2 + d] + i;
              w *= weight[d][k[d]];
            }
            if (!zero) sum += w * static_cast<double>(static_cast<compute_t<T>>(plane[at]));
            int d = r - 1;
            for (; d >= 0; --d) {
              if (++k[d] < taps[d]) break;
              k[d] = 0;
            }
            if (d < 0) break;
          }
          y[(b * channels + ch) * out_size + o] = static_cast<T>(static_cast<compute_t<T>>(sum));
        }
      }
    }
  }

  GridMode mode_ = GridMode::Linear;
  GridPadding padding_ = GridPadding::Zeros;
  bool align_corners_ = false;
  int spatial_ = 2;
};

int32_t grid_sample_supports(const edgert_node* node, const edgert_tensor*) {
  Attributes attrs(node);
  GridMode mode;
  GridPadding padding;
  if (!parse_grid_mode(attrs.get_string("mode", "linear"), mode)) return 0;
  return parse_grid_padding(attrs.get_string("padding_mode", "zeros"), padding) ? 1 : 0;
}

// theta [N, 2, 3] and size [N, C, H, W] give grid [N, H, W, 2]; theta [N, 3, 4] and size
// [N, C, D, H, W] give grid [N, D, H, W, 3]. Each grid point is theta times the homogeneous
// normalized position (x, y[, z], 1) of an output pixel.
class AffineGridOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    dispatch(in[0].dtype, kFloats, [](auto) {}, "theta");
    align_corners_ = Attributes(&node).get_int("align_corners", 0) != 0;
    info.data_dependent = 1;  // the output shape is the values of size
    std::vector<int64_t> size = read_ints(in[1], "size");
    if (size.size() != 4 && size.size() != 5)
      fail(EDGERT_ERR_SHAPE, "size must have 4 (N, C, H, W) or 5 (N, C, D, H, W) values, it has %zu", size.size());
    spatial_ = static_cast<int>(size.size()) - 2;
    const edgert_tensor& theta = in[0];
    if (theta.rank != 3 || theta.dims[0] != size[0] || theta.dims[1] != spatial_ || theta.dims[2] != spatial_ + 1)
      fail(EDGERT_ERR_SHAPE, "theta must have shape [%lld, %d, %d] for a %d-D size, its shape is %s",
           static_cast<long long>(size[0]), spatial_, spatial_ + 1, spatial_, shape_string(shape_of(theta)).c_str());
    Shape shape = {size[0]};
    for (int d = 0; d < spatial_; ++d) {
      if (size[2 + d] <= 0)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "size[%d] = %lld must be positive", 2 + d, static_cast<long long>(size[2 + d]));
      dims_[d] = size[2 + d];
      shape.push_back(size[2 + d]);
    }
    shape.push_back(spatial_);
    set_output(out[0], theta.dtype, shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch_only<kFloats>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* theta = data_as<const T>(in[0]);
      T* grid = data_as<T>(out[0]);
      const int r = spatial_;
      int64_t points = 1;
      for (int d = 0; d < r; ++d) points *= dims_[d];
      const int64_t batch = in[0].dims[0];
      for (int64_t b = 0; b < batch; ++b) {
        const T* t = theta + b * r * (r + 1);
        for (int64_t p = 0; p < points; ++p) {
          // Homogeneous position, innermost axis first: (x, y[, z], 1).
          double pos[kMaxSpatial + 1];
          for (int64_t d = r - 1, rest = p; d >= 0; --d) {
            pos[r - 1 - d] = normalized(rest % dims_[d], dims_[d]);
            rest /= dims_[d];
          }
          pos[r] = 1;
          for (int row = 0; row < r; ++row) {
            double v = 0;
            for (int k = 0; k <= r; ++k) v += static_cast<double>(static_cast<C>(t[row * (r + 1) + k])) * pos[k];
            grid[(b * points + p) * r + row] = static_cast<T>(static_cast<C>(v));
          }
        }
      }
    }, "theta");
  }

 private:
  // Position i of n in [-1, 1]: pixel centres at the ends with align_corners, else half a pixel in.
  double normalized(int64_t i, int64_t n) const {
    if (align_corners_) return n == 1 ? -1.0 : -1.0 + static_cast<double>(i) * (2.0 / static_cast<double>(n - 1));
    const double step = 2.0 / static_cast<double>(n);
    return -1.0 + step / 2 + static_cast<double>(i) * step;
  }

  bool align_corners_ = false;
  int spatial_ = 2;
  int64_t dims_[kMaxSpatial] = {};
};

}  // namespace

void register_grid_sample_kernels(KernelRegistry& r) {
  r.add<GridSampleOp>("GridSample", "ref-grid-sample", grid_sample_supports);
  r.add<AffineGridOp>("AffineGrid", "ref-affine-grid");
}

}  // namespace edgert::cpu

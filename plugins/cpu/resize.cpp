// Resampling ops: Resize (opset 10..19) and the deprecated Upsample (opset 7/9).
//
// Resize follows the ONNX reference (onnx/backend/test/case/node/resize.py): every output
// coordinate maps to an input coordinate per axis, and the N-D result is the tensor product of
// per-axis 1-D interpolations. Out-of-range taps read the edge (clamped index), which is what the
// reference's edge padding amounts to for the coordinates the transforms produce. With
// antialias=1, downsampling widens the linear and cubic filters to cover every input pixel an
// output pixel spans (antialias_coeffs).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "kernel.h"

namespace edgert::cpu {
namespace {

// Values of a small float tensor (scales, roi) as double. NEEDS_DATA while unknown.
std::vector<double> read_floats(const edgert_tensor& t, const char* what) {
  if (!t.data && numel(t) > 0) fail(EDGERT_ERR_NEEDS_DATA, "values of %s are not known yet", what);
  std::vector<double> values(static_cast<size_t>(numel(t)));
  dispatch(t.dtype, kFloats, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = data_as<T>(t);
    if constexpr (is_float_like_v<T>)  // dispatch instantiates every type; only floats get here
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(static_cast<compute_t<T>>(p[i]));
  }, what);
  return values;
}

// Stores a double into T: rounded and saturated for integer types.
template <typename T>
T store_as(double v) {
  if constexpr (std::is_integral_v<T>) {
    double r = std::nearbyint(v);
    if (!(r >= static_cast<double>(std::numeric_limits<T>::lowest()))) return std::numeric_limits<T>::lowest();
    if (r >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(r);
  } else {
    return static_cast<T>(static_cast<compute_t<T>>(v));
  }
}

enum class Interp { Nearest, Linear, Cubic };
enum class Coord { HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNN, TfCropAndResize };
// Simple: opset < 11 Resize and Upsample — floor when upsampling, ceil when downsampling (ONNX Runtime).
enum class Nearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };

bool parse_interp(const std::string& s, bool upsample, Interp& out) {
  if (s == "nearest") out = Interp::Nearest;
  else if (s == "linear" || (upsample && s == "bilinear")) out = Interp::Linear;
  else if (s == "cubic" && !upsample) out = Interp::Cubic;
  else return false;
  return true;
}

bool parse_coord(const std::string& s, Coord& out) {
  if (s == "half_pixel") out = Coord::HalfPixel;
  else if (s == "half_pixel_symmetric") out = Coord::HalfPixelSymmetric;
  else if (s == "pytorch_half_pixel") out = Coord::PytorchHalfPixel;
  else if (s == "align_corners") out = Coord::AlignCorners;
  else if (s == "asymmetric") out = Coord::Asymmetric;
  else if (s == "tf_half_pixel_for_nn") out = Coord::TfHalfPixelForNN;
  else if (s == "tf_crop_and_resize") out = Coord::TfCropAndResize;
  else return false;
  return true;
}

bool parse_nearest(const std::string& s, Nearest& out) {
  if (s == "round_prefer_floor") out = Nearest::RoundPreferFloor;
  else if (s == "round_prefer_ceil") out = Nearest::RoundPreferCeil;
  else if (s == "floor") out = Nearest::Floor;
  else if (s == "ceil") out = Nearest::Ceil;
  else return false;
  return true;
}

// The cubic convolution kernel at distance x >= 0 (zero from 2 on).
double cubic_kernel(double x, double a) {
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// Cubic convolution weights of the 4 taps floor(x)-1 .. floor(x)+2 for fractional part t.
void cubic_coeffs(double t, double a, double c[4]) {
  c[0] = cubic_kernel(t + 1, a);
  c[1] = cubic_kernel(t, a);
  c[2] = cubic_kernel(1 - t, a);
  c[3] = cubic_kernel(2 - t, a);
}

// One tap of a 1-D interpolation: input offset along the axis (index * stride) and weight.
struct Tap {
  int64_t offset;
  double weight;
};

// Per-axis sampling plan: taps of output coordinate o are taps[begin[o] .. begin[o+1]).
struct AxisPlan {
  std::vector<int64_t> begin;
  std::vector<Tap> taps;
  std::vector<uint8_t> outside;  // tf_crop_and_resize: coordinate falls outside the input
};

struct ResizeParams {
  Interp interp = Interp::Nearest;
  Coord coord = Coord::HalfPixel;
  Nearest nearest = Nearest::RoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
};

// Input coordinate of output coordinate x along one axis (ONNX Resize's transforms).
double original_coordinate(const ResizeParams& p, int64_t x, double scale, int64_t in, int64_t out,
                           double roi_start, double roi_end) {
  const double xr = static_cast<double>(x);
  const double length_resized = scale * static_cast<double>(in);  // as the reference: not rounded
  switch (p.coord) {
    case Coord::HalfPixel: return (xr + 0.5) / scale - 0.5;
    case Coord::HalfPixelSymmetric: {
      double adjustment = static_cast<double>(out) / length_resized;
      double center = static_cast<double>(in) / 2;
      return center * (1 - adjustment) + (xr + 0.5) / scale - 0.5;
    }
    case Coord::PytorchHalfPixel: return length_resized > 1 ? (xr + 0.5) / scale - 0.5 : -0.5;
    case Coord::AlignCorners:
      return length_resized == 1 ? 0.0 : xr * static_cast<double>(in - 1) / (length_resized - 1);
    case Coord::Asymmetric: return xr / scale;
    case Coord::TfHalfPixelForNN: return (xr + 0.5) / scale;
    case Coord::TfCropAndResize: {
      double span = (roi_end - roi_start) * static_cast<double>(in - 1);
      double v = length_resized > 1 ? xr * span / (length_resized - 1) : span / 2;
      return v + roi_start * static_cast<double>(in - 1);
    }
  }
  return 0;
}

// Antialiased linear or cubic weights (Resize antialias=1): when downsampling by `scale` the
// kernel is stretched by 1 / scale, so every output averages all the input pixels it covers
// instead of sampling 2 or 4 of them; weights are normalised to sum 1. Upsampling keeps the
// plain kernel. Fills w with the taps first, first + 1, ... and returns their count.
int antialias_coeffs(const ResizeParams& p, double xo, double scale, int64_t& first, std::vector<double>& w) {
  const double s = std::min(scale, 1.0);
  const double support = p.interp == Interp::Linear ? 1.0 : 2.0;  // the kernel's radius in taps
  // ratio in (0, 1]: an exact integer coordinate counts as 1 past the pixel before it, which
  // places the window as the ONNX reference does.
  double base = std::floor(xo);
  double ratio = xo - base;
  if (ratio == 0) {
    ratio = 1;
    base -= 1;
  }
  const int64_t start = static_cast<int64_t>(std::floor(-support / s) + 1);
  const int n = static_cast<int>(2 - 2 * start);
  first = static_cast<int64_t>(base) + start;
  w.assign(static_cast<size_t>(n), 0.0);
  double sum = 0;
  for (int k = 0; k < n; ++k) {
    const double x = std::fabs((static_cast<double>(start + k) - ratio) * s);
    w[static_cast<size_t>(k)] = p.interp == Interp::Linear ? std::max(0.0, 1.0 - x) : cubic_kernel(x, p.cubic_a);
    sum += w[static_cast<size_t>(k)];
  }
  for (double& v : w) v /= sum;
  return n;
}

AxisPlan plan_axis(const ResizeParams& p, int64_t in, int64_t out, double scale, int64_t stride,
                   double roi_start, double roi_end) {
  AxisPlan plan;
  plan.begin.reserve(static_cast<size_t>(out) + 1);
  plan.outside.assign(static_cast<size_t>(out), 0);
  auto clamp = [in](int64_t i) { return std::min(std::max<int64_t>(i, 0), in - 1); };
  std::vector<double> w(4);
  for (int64_t x = 0; x < out; ++x) {
    plan.begin.push_back(static_cast<int64_t>(plan.taps.size()));
    double xo = original_coordinate(p, x, scale, in, out, roi_start, roi_end);
    if (p.coord == Coord::TfCropAndResize && (xo < 0 || xo > static_cast<double>(in - 1))) {
      plan.outside[static_cast<size_t>(x)] = 1;
      continue;
    }
    if (p.interp == Interp::Nearest) {
      double r;
      switch (p.nearest) {
        case Nearest::RoundPreferFloor: r = std::ceil(xo - 0.5); break;
        case Nearest::RoundPreferCeil: r = std::floor(xo + 0.5); break;
        case Nearest::Floor: r = std::floor(xo); break;
        case Nearest::Ceil: r = std::ceil(xo); break;
        default: r = scale < 1 ? std::ceil(xo) : std::floor(xo); break;
      }
      plan.taps.push_back({clamp(static_cast<int64_t>(r)) * stride, 1.0});
      continue;
    }
    double base = std::floor(xo);
    double t = xo - base;
    int64_t first;
    int n;
    if (p.antialias) {
      n = antialias_coeffs(p, xo, scale, first, w);
    } else if (p.interp == Interp::Linear) {
      first = static_cast<int64_t>(base);
      w[0] = 1 - t;
      w[1] = t;
      n = 2;
    } else {
      first = static_cast<int64_t>(base) - 1;
      cubic_coeffs(t, p.cubic_a, w.data());
      n = 4;
    }
    if (p.exclude_outside) {  // taps outside the input get no weight; renormalise the rest
      double sum = 0;
      for (int k = 0; k < n; ++k) {
        if (first + k < 0 || first + k >= in) w[k] = 0;
        sum += w[k];
      }
      if (sum != 0)
        for (int k = 0; k < n; ++k) w[k] /= sum;
    }
    for (int k = 0; k < n; ++k)
      if (w[k] != 0) plan.taps.push_back({clamp(first + k) * stride, w[k]});
  }
  plan.begin.push_back(static_cast<int64_t>(plan.taps.size()));
  return plan;
}

// Resize and Upsample: the same machinery; Upsample is Resize with asymmetric coordinates and
// floor/ceil nearest rounding, scales only.
template <bool kUpsample>
class ResizeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    const bool legacy = kUpsample || node.opset < 11;  // opset-10 Resize behaves like Upsample
    std::string mode = attrs.get_string("mode", "nearest");
    if (!parse_interp(mode, kUpsample, p_.interp) || (legacy && p_.interp == Interp::Cubic))
      fail(EDGERT_ERR_UNSUPPORTED, "mode '%s' is not supported", mode.c_str());
    if (legacy) {
      p_.coord = Coord::Asymmetric;
      p_.nearest = Nearest::Simple;
    } else {
      std::string coord = attrs.get_string("coordinate_transformation_mode", "half_pixel");
      if (!parse_coord(coord, p_.coord))
        fail(EDGERT_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s' is not supported", coord.c_str());
      std::string nearest = attrs.get_string("nearest_mode", "round_prefer_floor");
      if (!parse_nearest(nearest, p_.nearest))
        fail(EDGERT_ERR_UNSUPPORTED, "nearest_mode '%s' is not supported", nearest.c_str());
      p_.cubic_a = attrs.get_float("cubic_coeff_a", -0.75f);
      p_.exclude_outside = attrs.get_int("exclude_outside", 0) != 0;
      // antialias only changes the linear and cubic filters; nearest ignores it.
      p_.antialias = attrs.get_int("antialias", 0) != 0 && p_.interp != Interp::Nearest;
    }
    extrapolation_ = attrs.get_float("extrapolation_value", 0.0f);
    dispatch(in[0].dtype, kNumeric, [](auto) {}, "X");

    const int64_t rank = in[0].rank;
    const Shape in_shape = shape_of(in[0]);

    // Axes the scales/sizes/roi refer to (opset 18 'axes'; all axes before).
    std::vector<int64_t> axes;
    if (!legacy && node.opset >= 18 && attrs.has("axes")) {
      for (int64_t a : attrs.get_ints("axes")) axes.push_back(normalize_axis(a, rank, "axes entry"));
    } else {
      for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    }
    const size_t naxes = axes.size();

    // Which input holds what depends on the op and opset.
    const edgert_tensor* roi = nullptr;
    const edgert_tensor* scales = nullptr;
    const edgert_tensor* sizes = nullptr;
    auto input = [&](int i) -> const edgert_tensor* {
      return i < node.num_inputs && is_present(in[i]) ? &in[i] : nullptr;
    };
    std::vector<double> scale_values;
    if (kUpsample && node.opset < 9) {
      for (float s : attrs.get_floats("scales")) scale_values.push_back(s);
      info.data_dependent = 0;
    } else if (legacy) {
      scales = input(1);
      if (!scales) fail(EDGERT_ERR_INVALID_ARGUMENT, "input 'scales' is missing");
    } else {
      roi = input(1);
      scales = input(2);
      sizes = input(3);
    }
    if (scales || sizes || roi) info.data_dependent = 1;  // output shape follows these values
    if (scales && numel(*scales) == 0) scales = nullptr;  // opset 11: empty scales means "use sizes"
    if (sizes && numel(*sizes) == 0) sizes = nullptr;
    if (scales && sizes) fail(EDGERT_ERR_INVALID_ARGUMENT, "only one of 'scales' and 'sizes' may be given");
    if (scales) scale_values = read_floats(*scales, "scales");

    // roi: starts then ends, per listed axis; only tf_crop_and_resize reads it.
    std::vector<double> roi_start(static_cast<size_t>(rank), 0.0), roi_end(static_cast<size_t>(rank), 1.0);
    if (p_.coord == Coord::TfCropAndResize) {
      if (!roi) fail(EDGERT_ERR_INVALID_ARGUMENT, "tf_crop_and_resize needs the 'roi' input");
      std::vector<double> r = read_floats(*roi, "roi");
      if (r.size() != 2 * naxes)
        fail(EDGERT_ERR_SHAPE, "roi has %zu values, expected %zu (2 per axis)", r.size(), 2 * naxes);
      for (size_t i = 0; i < naxes; ++i) {
        roi_start[static_cast<size_t>(axes[i])] = r[i];
        roi_end[static_cast<size_t>(axes[i])] = r[naxes + i];
      }
    }

    std::vector<double> scale(static_cast<size_t>(rank), 1.0);
    Shape out_shape = in_shape;
    if (!scale_values.empty()) {
      if (scale_values.size() != naxes)
        fail(EDGERT_ERR_SHAPE, "scales has %zu values, expected %zu", scale_values.size(), naxes);
      for (size_t i = 0; i < naxes; ++i) {
        size_t a = static_cast<size_t>(axes[i]);
        if (!(scale_values[i] > 0)) fail(EDGERT_ERR_INVALID_ARGUMENT, "scales[%zu] = %g must be positive", i, scale_values[i]);
        scale[a] = scale_values[i];
        double length = static_cast<double>(in_shape[a]) * scale[a];
        if (node.opset >= 18 && p_.coord == Coord::TfCropAndResize) length *= roi_end[a] - roi_start[a];
        out_shape[a] = static_cast<int64_t>(std::floor(length));
      }
    } else if (sizes) {
      std::vector<int64_t> s = read_ints(*sizes, "sizes");
      if (s.size() != naxes) fail(EDGERT_ERR_SHAPE, "sizes has %zu values, expected %zu", s.size(), naxes);
      std::string policy = node.opset >= 18 ? attrs.get_string("keep_aspect_ratio_policy", "stretch") : "stretch";
      if (policy == "stretch") {
        for (size_t i = 0; i < naxes; ++i) {
          size_t a = static_cast<size_t>(axes[i]);
          out_shape[a] = s[i];
          scale[a] = in_shape[a] > 0 ? static_cast<double>(s[i]) / static_cast<double>(in_shape[a]) : 1.0;
        }
      } else if (policy == "not_larger" || policy == "not_smaller") {
        double k = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
        for (size_t i = 0; i < naxes; ++i) {
          double r = static_cast<double>(s[i]) / static_cast<double>(in_shape[static_cast<size_t>(axes[i])]);
          k = policy == "not_larger" ? std::min(k, r) : std::max(k, r);
        }
        for (size_t i = 0; i < naxes; ++i) {
          size_t a = static_cast<size_t>(axes[i]);
          scale[a] = k;
          out_shape[a] = static_cast<int64_t>(std::floor(k * static_cast<double>(in_shape[a]) + 0.5));
        }
      } else {
        fail(EDGERT_ERR_UNSUPPORTED, "keep_aspect_ratio_policy '%s' is not supported", policy.c_str());
      }
    } else {
      fail(EDGERT_ERR_INVALID_ARGUMENT, "one of 'scales' and 'sizes' must be given");
    }
    for (int64_t a = 0; a < rank; ++a)
      if (out_shape[a] < 0) fail(EDGERT_ERR_SHAPE, "output dimension %lld is negative", static_cast<long long>(a));
    set_output(out[0], in[0].dtype, out_shape);

    // Sampling plans, one per axis.
    rank_ = static_cast<int>(rank);
    plans_.clear();
    int64_t stride = 1;
    std::vector<int64_t> strides(static_cast<size_t>(rank));
    for (int64_t a = rank - 1; a >= 0; --a) {
      strides[static_cast<size_t>(a)] = stride;
      stride *= in_shape[a];
    }
    if (numel(out_shape) == 0) return;
    if (numel(in_shape) == 0) fail(EDGERT_ERR_SHAPE, "cannot resize an empty input to a non-empty output");
    for (int64_t a = 0; a < rank; ++a) {
      size_t ua = static_cast<size_t>(a);
      plans_.push_back(plan_axis(p_, in_shape[ua], out_shape[ua], scale[ua], strides[ua], roi_start[ua], roi_end[ua]));
    }
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (numel(out[0]) == 0) return;
    dispatch(in[0].dtype, kNumeric, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, bool>) run(data_as<const T>(in[0]), data_as<T>(out[0]), out[0]);
    });
  }

 private:
  // Sum over the tensor product of the per-axis taps from axis d on; innermost axis first,
  // as the reference nests its 1-D interpolations.
  template <typename T>
  double gather(const T* x, int d, int64_t offset, const int64_t* coord) const {
    if (d == rank_) return static_cast<double>(static_cast<compute_t<T>>(x[offset]));
    const AxisPlan& plan = plans_[static_cast<size_t>(d)];
    int64_t b = plan.begin[static_cast<size_t>(coord[d])], e = plan.begin[static_cast<size_t>(coord[d]) + 1];
    if (e - b == 1 && plan.taps[static_cast<size_t>(b)].weight == 1.0)
      return gather(x, d + 1, offset + plan.taps[static_cast<size_t>(b)].offset, coord);
    double sum = 0;
    for (int64_t k = b; k < e; ++k) {
      const Tap& tap = plan.taps[static_cast<size_t>(k)];
      sum += tap.weight * gather(x, d + 1, offset + tap.offset, coord);
    }
    return sum;
  }

  template <typename T>
  void run(const T* x, T* y, const edgert_tensor& out) const {
    int64_t coord[EDGERT_MAX_RANK] = {};
    const int64_t n = numel(out);
    for (int64_t i = 0; i < n; ++i) {
      bool outside = false;
      for (int d = 0; d < rank_; ++d) outside = outside || plans_[static_cast<size_t>(d)].outside[static_cast<size_t>(coord[d])];
      y[i] = store_as<T>(outside ? static_cast<double>(extrapolation_) : gather(x, 0, 0, coord));
      for (int d = rank_ - 1; d >= 0; --d) {  // next output coordinate, row-major
        if (++coord[d] < out.dims[d]) break;
        coord[d] = 0;
      }
    }
  }

  ResizeParams p_;
  float extrapolation_ = 0;
  int rank_ = 0;
  std::vector<AxisPlan> plans_;
};

int32_t resize_supports(const edgert_node* node, const edgert_tensor*) {
  Attributes attrs(node);
  bool legacy = node->opset < 11;
  Interp interp;
  if (!parse_interp(attrs.get_string("mode", "nearest"), false, interp)) return 0;
  if (legacy) return interp != Interp::Cubic;
  Coord coord;
  Nearest nearest;
  if (!parse_coord(attrs.get_string("coordinate_transformation_mode", "half_pixel"), coord)) return 0;
  if (!parse_nearest(attrs.get_string("nearest_mode", "round_prefer_floor"), nearest)) return 0;
  std::string policy = attrs.get_string("keep_aspect_ratio_policy", "stretch");
  return policy == "stretch" || policy == "not_larger" || policy == "not_smaller";
}

int32_t upsample_supports(const edgert_node* node, const edgert_tensor*) {
  Interp interp;
  return parse_interp(Attributes(node).get_string("mode", "nearest"), true, interp);
}

}  // namespace

void register_resize_kernels(KernelRegistry& r) {
  r.add<ResizeOp<false>>("Resize", "ref-resize", resize_supports);
  r.add<ResizeOp<true>>("Upsample", "ref-upsample", upsample_supports);
}

}  // namespace edgert::cpu

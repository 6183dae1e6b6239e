// Resize (opset 10 to 19) and Upsample on the GPU, with the CPU plugin's semantics
// (plugins/cpu/resize.cpp, after the ONNX reference): every output coordinate maps to an input
// coordinate per axis (coordinate_transformation_mode half_pixel, half_pixel_symmetric,
// pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize), and
// the result is the tensor product of per-axis 1-D interpolations: nearest (nearest_mode
// round_prefer_floor, round_prefer_ceil, floor, ceil; opset < 11 and Upsample round down when
// upsampling and up when downsampling) or linear on up to three axes (exclude_outside
// honoured). Out-of-range taps read the edge. Cubic and antialias are refused.
//
// Coordinates are computed in double, as the CPU plugin, so nearest picks the same input
// element: once per run into a table of taps per resized axis (the workspace), which the
// per-element kernel reads; interpolation weights and sums are float. scales, sizes and roi are read on the host
// in prepare. With layout NHWC a rank-4 X and Y are [N, H, W, C] in memory.
#include <cmath>
#include <limits>
#include <string>

#include "activation.cuh"
#include "cuda_op.h"
#include "edgert/dtype_info.h"
#include "grid.cuh"
#include "host_operands.h"
#include "layout.h"

namespace edgert::cuda {
namespace {

constexpr unsigned kThreads = 256;

enum class Interp : int { Nearest, Linear };
enum class Coord : int { HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNN, TfCropAndResize };
// Simple: opset < 11 Resize and Upsample.
enum class Nearest : int { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };

bool parse_interp(const std::string& s, bool upsample, Interp& out) {
  if (s == "nearest") out = Interp::Nearest;
  else if (s == "linear" || (upsample && s == "bilinear")) out = Interp::Linear;
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

// One axis, in storage order.
struct ResizeAxis {
  int64_t in = 1, out = 1, stride = 1;  // stride: of the input, in elements
  double scale = 1, roi_start = 0, roi_end = 1;
  bool identity = true;  // output coordinate o reads input o alone: no table
  int64_t table = 0;     // the first of this axis's `out` taps in the workspace
};

struct ResizePlan {
  int rank = 0;
  ResizeAxis axes[EDGERT_MAX_RANK];
  Interp interp = Interp::Nearest;
  Coord coord = Coord::HalfPixel;
  Nearest nearest = Nearest::RoundPreferFloor;
  bool exclude_outside = false;
  float extrapolation = 0;
  int64_t taps = 0;  // table entries of all axes
};

// What output coordinate o of an axis reads: input offsets (index * stride) and their weights
// (nearest: at0 alone, weight 1); at0 < 0 when the coordinate falls outside the input
// (tf_crop_and_resize). Computed once per run by resize_taps, so the per-element kernel does no
// double-precision math (slow on Jetson GPUs).
struct Tap {
  int64_t at0, at1;
  float w0, w1;
};

__device__ double original_coordinate(Coord coord, const ResizeAxis& a, int64_t x) {
  const double xr = static_cast<double>(x), in = static_cast<double>(a.in);
  const double length_resized = a.scale * in;  // as the reference: not rounded
  switch (coord) {
    case Coord::HalfPixel: return (xr + 0.5) / a.scale - 0.5;
    case Coord::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(a.out) / length_resized;
      const double center = in / 2;
      return center * (1 - adjustment) + (xr + 0.5) / a.scale - 0.5;
    }
    case Coord::PytorchHalfPixel: return length_resized > 1 ? (xr + 0.5) / a.scale - 0.5 : -0.5;
    case Coord::AlignCorners: return length_resized == 1 ? 0.0 : xr * (in - 1) / (length_resized - 1);
    case Coord::Asymmetric: return xr / a.scale;
    case Coord::TfHalfPixelForNN: return (xr + 0.5) / a.scale;
    case Coord::TfCropAndResize: {
      const double span = (a.roi_end - a.roi_start) * (in - 1);
      const double v = length_resized > 1 ? xr * span / (length_resized - 1) : span / 2;
      return v + a.roi_start * (in - 1);
    }
  }
  return 0;
}

__device__ __forceinline__ int64_t clamp_index(int64_t i, int64_t n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

// One thread per table entry: the taps of output coordinate o of a non-identity axis.
__global__ void resize_taps(ResizePlan p, Tap* __restrict__ taps) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < p.taps;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int d = 0;
    while (p.axes[d].identity || k >= p.axes[d].table + p.axes[d].out) ++d;
    const ResizeAxis& a = p.axes[d];
    const int64_t o = k - a.table;
    const double xo = original_coordinate(p.coord, a, o);
    Tap t{0, 0, 1.f, 0.f};
    if (p.coord == Coord::TfCropAndResize && (xo < 0 || xo > static_cast<double>(a.in - 1))) {
      t.at0 = -1;
    } else if (p.interp == Interp::Nearest) {
      double r;
      switch (p.nearest) {
        case Nearest::RoundPreferFloor: r = ceil(xo - 0.5); break;
        case Nearest::RoundPreferCeil: r = floor(xo + 0.5); break;
        case Nearest::Floor: r = floor(xo); break;
        case Nearest::Ceil: r = ceil(xo); break;
        default: r = a.scale < 1 ? ceil(xo) : floor(xo); break;
      }
      t.at0 = clamp_index(static_cast<int64_t>(r), a.in) * a.stride;
    } else {
      const double floor_xo = floor(xo);
      const double frac = xo - floor_xo;
      const int64_t i0 = static_cast<int64_t>(floor_xo), i1 = i0 + 1;
      double w0 = 1 - frac, w1 = frac;
      if (p.exclude_outside) {  // taps outside the input get no weight; renormalise the rest
        if (i0 < 0 || i0 >= a.in) w0 = 0;
        if (i1 < 0 || i1 >= a.in) w1 = 0;
        const double sum = w0 + w1;
        if (sum != 0) {
          w0 /= sum;
          w1 /= sum;
        }
      }
      t.at0 = clamp_index(i0, a.in) * a.stride;
      t.at1 = clamp_index(i1, a.in) * a.stride;
      t.w0 = static_cast<float>(w0);
      t.w1 = static_cast<float>(w1);
      if (t.w0 == 0.f) {  // keep the one tap in at0
        t.at0 = t.at1;
        t.w0 = t.w1;
        t.w1 = 0.f;
      }
    }
    taps[k] = t;
  }
}

constexpr int kMaxLinearAxes = 3;  // trilinear; prepare refuses more

template <typename T>
__global__ void resize_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, ResizePlan p,
                              const Tap* __restrict__ taps) {
  grid_stride(total, [&](auto index) {
    using I = decltype(index);
    I rest = index;
    int64_t base = 0;
    // Up to three axes with two taps of non-zero weight: the second tap's offset from the first
    // and both weights (unused ones read nothing: weights 1 and 0).
    int pairs = 0;
    int64_t delta[kMaxLinearAxes] = {0, 0, 0};
    float first[kMaxLinearAxes] = {1.f, 1.f, 1.f}, second[kMaxLinearAxes] = {0.f, 0.f, 0.f};
    float weight = 1.f;  // product of the single taps' weights
    bool outside = false;
    for (int d = p.rank - 1; d >= 0; --d) {
      const ResizeAxis& a = p.axes[d];
      const int64_t o = static_cast<int64_t>(rest % static_cast<I>(a.out));
      rest /= static_cast<I>(a.out);
      if (a.identity) {
        base += o * a.stride;
        continue;
      }
      const Tap t = taps[a.table + o];
      if (t.at0 < 0) {
        outside = true;
        continue;
      }
      base += t.at0;
      if (t.w1 == 0.f) {
        weight *= t.w0;
        continue;
      }
      // Registers, not a local array: the slot is chosen by unrolled compares.
#pragma unroll
      for (int k = 0; k < kMaxLinearAxes; ++k)
        if (k == pairs) {
          delta[k] = t.at1 - t.at0;
          first[k] = t.w0;
          second[k] = t.w1;
        }
      ++pairs;
    }
    float v = 0.f;
    if (outside) {
      v = p.extrapolation;
    } else {
#pragma unroll
      for (int i2 = 0; i2 < 2; ++i2) {
        const float w2 = i2 ? second[2] : first[2];
        if (w2 == 0.f) continue;
#pragma unroll
        for (int i1 = 0; i1 < 2; ++i1) {
          const float w1 = i1 ? second[1] : first[1];
          if (w1 == 0.f) continue;
#pragma unroll
          for (int i0 = 0; i0 < 2; ++i0) {
            const float w0 = i0 ? second[0] : first[0];
            if (w0 == 0.f) continue;
            v += weight * w2 * w1 * w0 * to_float(x[base + i0 * delta[0] + i1 * delta[1] + i2 * delta[2]]);
          }
        }
      }
    }
    y[index] = from_float<T>(v);
  });
}

int32_t resize_supports(const edgert_node* node, const edgert_tensor* in) {
  const Attributes attrs(node);
  const bool upsample = std::string(node->op_type) == "Upsample";
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[0].dtype)) return 0;
  if (in[0].rank > EDGERT_MAX_RANK) return 0;
  Interp interp;
  if (!parse_interp(attrs.get_string("mode", "nearest"), upsample, interp)) return 0;
  if (upsample || node->opset < 11) return 1;
  Coord coord;
  Nearest nearest;
  if (!parse_coord(attrs.get_string("coordinate_transformation_mode", "half_pixel"), coord)) return 0;
  if (!parse_nearest(attrs.get_string("nearest_mode", "round_prefer_floor"), nearest)) return 0;
  if (attrs.get_int("antialias", 0) != 0) return 0;
  const std::string policy = attrs.get_string("keep_aspect_ratio_policy", "stretch");
  return policy == "stretch" || policy == "not_larger" || policy == "not_smaller";
}

class ResizeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const Attributes attrs(&node);
    const bool upsample = std::string(node.op_type) == "Upsample";
    const bool legacy = upsample || node.opset < 11;  // opset-10 Resize behaves like Upsample
    if (!is_float(in[0].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "X is %s; the GPU kernel takes float32 and float16", edgert_dtype_name(in[0].dtype));
    dtype_ = in[0].dtype;
    ResizePlan p;
    const std::string mode = attrs.get_string("mode", "nearest");
    if (!parse_interp(mode, upsample, p.interp)) fail(EDGERT_ERR_UNSUPPORTED, "mode '%s' is not supported", mode.c_str());
    if (legacy) {
      p.coord = Coord::Asymmetric;
      p.nearest = Nearest::Simple;
    } else {
      const std::string coord = attrs.get_string("coordinate_transformation_mode", "half_pixel");
      if (!parse_coord(coord, p.coord))
        fail(EDGERT_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s' is not supported", coord.c_str());
      const std::string nearest = attrs.get_string("nearest_mode", "round_prefer_floor");
      if (!parse_nearest(nearest, p.nearest))
        fail(EDGERT_ERR_UNSUPPORTED, "nearest_mode '%s' is not supported", nearest.c_str());
      p.exclude_outside = attrs.get_int("exclude_outside", 0) != 0;
      if (attrs.get_int("antialias", 0) != 0) fail(EDGERT_ERR_UNSUPPORTED, "antialias=1 is not supported");
    }
    p.extrapolation = attrs.get_float("extrapolation_value", 0.0f);

    const int64_t rank = in[0].rank;
    const Shape in_shape = shape_of(in[0]);
    std::vector<int64_t> axes;  // the axes scales/sizes/roi refer to (opset 18 'axes'; all before)
    if (!legacy && node.opset >= 18 && attrs.has("axes")) {
      for (int64_t a : attrs.get_ints("axes")) axes.push_back(normalize_axis(a, rank, "axes entry"));
    } else {
      for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    }
    const size_t naxes = axes.size();

    const edgert_tensor* roi = nullptr;
    const edgert_tensor* scales = nullptr;
    const edgert_tensor* sizes = nullptr;
    auto input = [&](int i) -> const edgert_tensor* { return i < node.num_inputs && is_present(in[i]) ? &in[i] : nullptr; };
    std::vector<double> scale_values;
    if (upsample && node.opset < 9) {
      for (float s : attrs.get_floats("scales")) scale_values.push_back(s);
    } else if (legacy) {
      scales = input(1);
      if (!scales) fail(EDGERT_ERR_INVALID_ARGUMENT, "input 'scales' is missing");
    } else {
      roi = input(1);
      scales = input(2);
      sizes = input(3);
    }
    if (scales || sizes || roi) info.data_dependent = 1;  // the output shape follows these values
    if (scales && numel(*scales) == 0) scales = nullptr;  // opset 11: empty scales means "use sizes"
    if (sizes && numel(*sizes) == 0) sizes = nullptr;
    if (scales && sizes) fail(EDGERT_ERR_INVALID_ARGUMENT, "only one of 'scales' and 'sizes' may be given");
    if (scales) scale_values = read_floats(*scales, "scales");

    std::vector<double> roi_start(static_cast<size_t>(rank), 0.0), roi_end(static_cast<size_t>(rank), 1.0);
    if (p.coord == Coord::TfCropAndResize) {
      if (!roi) fail(EDGERT_ERR_INVALID_ARGUMENT, "tf_crop_and_resize needs the 'roi' input");
      const std::vector<double> r = read_floats(*roi, "roi");
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
        const size_t a = static_cast<size_t>(axes[i]);
        if (!(scale_values[i] > 0)) fail(EDGERT_ERR_INVALID_ARGUMENT, "scales[%zu] = %g must be positive", i, scale_values[i]);
        scale[a] = scale_values[i];
        double length = static_cast<double>(in_shape[a]) * scale[a];
        if (node.opset >= 18 && p.coord == Coord::TfCropAndResize) length *= roi_end[a] - roi_start[a];
        out_shape[a] = static_cast<int64_t>(std::floor(length));
      }
    } else if (sizes) {
      const std::vector<int64_t> s = read_ints(*sizes, "sizes");
      if (s.size() != naxes) fail(EDGERT_ERR_SHAPE, "sizes has %zu values, expected %zu", s.size(), naxes);
      const std::string policy = node.opset >= 18 ? attrs.get_string("keep_aspect_ratio_policy", "stretch") : "stretch";
      if (policy == "stretch") {
        for (size_t i = 0; i < naxes; ++i) {
          const size_t a = static_cast<size_t>(axes[i]);
          out_shape[a] = s[i];
          scale[a] = in_shape[a] > 0 ? static_cast<double>(s[i]) / static_cast<double>(in_shape[a]) : 1.0;
        }
      } else if (policy == "not_larger" || policy == "not_smaller") {
        double k = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
        for (size_t i = 0; i < naxes; ++i) {
          const double r = static_cast<double>(s[i]) / static_cast<double>(in_shape[static_cast<size_t>(axes[i])]);
          k = policy == "not_larger" ? std::min(k, r) : std::max(k, r);
        }
        for (size_t i = 0; i < naxes; ++i) {
          const size_t a = static_cast<size_t>(axes[i]);
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
    set_output(out[0], dtype_, out_shape);
    total_ = numel(out_shape);
    if (total_ > 0 && numel(in_shape) == 0) fail(EDGERT_ERR_SHAPE, "cannot resize an empty input to a non-empty output");

    // Per-axis plans in storage order.
    const bool nhwc = channels_last(node);
    const std::vector<int64_t> in_strides = storage_strides(in_shape, nhwc);
    // An axis that keeps its size at scale 1 maps o to o exactly, except where tf_crop_and_resize
    // crops it and where tf_half_pixel_for_nn's half-pixel shift rounds up.
    auto identity = [&](size_t a) {
      if (in_shape[a] != out_shape[a] || scale[a] != 1.0) return false;
      if (p.coord == Coord::TfCropAndResize) return roi_start[a] == 0.0 && roi_end[a] == 1.0;
      if (p.coord == Coord::TfHalfPixelForNN)
        return p.interp == Interp::Nearest && (p.nearest == Nearest::Floor || p.nearest == Nearest::RoundPreferFloor);
      return true;
    };
    int linear_axes = 0;
    p.rank = static_cast<int>(rank);
    for (int64_t pos = 0; pos < rank; ++pos) {
      const size_t a = static_cast<size_t>(logical_axis(pos, rank, nhwc));
      ResizeAxis& axis = p.axes[pos];
      axis.in = in_shape[a];
      axis.out = out_shape[a];
      axis.stride = in_strides[a];
      axis.scale = scale[a];
      axis.roi_start = roi_start[a];
      axis.roi_end = roi_end[a];
      axis.identity = identity(a);
      if (!axis.identity) {
        axis.table = p.taps;
        p.taps += axis.out;
        linear_axes += p.interp == Interp::Linear;
      }
    }
    if (linear_axes > kMaxLinearAxes)
      fail(EDGERT_ERR_UNSUPPORTED, "linear resize of %d axes; the GPU kernel interpolates at most %d", linear_axes,
           kMaxLinearAxes);
    plan_ = p;
    info.workspace_bytes = static_cast<size_t>(p.taps) * sizeof(Tap);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace,
               cudaStream_t stream) override {
    if (total_ == 0) return;
    Tap* taps = static_cast<Tap*>(workspace);
    if (plan_.taps > 0) {
      resize_taps<<<blocks_for(plan_.taps, kThreads), kThreads, 0, stream>>>(plan_, taps);
      check_launch("resize_taps");
    }
    const unsigned blocks = blocks_for(total_, kThreads);
    if (dtype_ == EDGERT_DTYPE_FLOAT16)
      resize_kernel<__half><<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(in[0].data),
                                                            static_cast<__half*>(out[0].data), total_, plan_, taps);
    else
      resize_kernel<float><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(in[0].data),
                                                           static_cast<float*>(out[0].data), total_, plan_, taps);
    check_launch("resize_kernel");
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  ResizePlan plan_;
  int64_t total_ = 0;
};

}  // namespace

void register_resize_kernels(KernelRegistry& r) {
  r.add<ResizeOp>("Resize", "cuda-resize", resize_supports, nullptr, (1u << 1) | (1u << 2) | (1u << 3));
  r.add<ResizeOp>("Upsample", "cuda-upsample", resize_supports, nullptr, 1u << 1);
}

}  // namespace edgert::cuda

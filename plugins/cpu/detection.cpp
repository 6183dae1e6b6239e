// Detection post-processing ops: NonMaxSuppression (opset 10/11) and RoiAlign (opset 10/16).
// Both follow ONNX Runtime's CPU kernels, which the ONNX node tests agree with.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "kernel.h"
#include "non_max_suppression.h"

namespace edgert::cpu {
namespace {

// NonMaxSuppression's output shape is the number of boxes kept, so the selection
// (non_max_suppression.h) is made in prepare (data_dependent) and execute copies it out.
class NonMaxSuppressionOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    info.data_dependent = 1;
    const edgert_tensor& boxes = in[0];
    const edgert_tensor& scores = in[1];
    if (boxes.dtype != EDGERT_DTYPE_FLOAT32 || scores.dtype != EDGERT_DTYPE_FLOAT32)
      fail(EDGERT_ERR_UNSUPPORTED, "boxes and scores must be float32, got %s and %s", dtype_name(boxes.dtype),
           dtype_name(scores.dtype));
    if (boxes.rank != 3 || boxes.dims[2] != 4)
      fail(EDGERT_ERR_SHAPE, "boxes has shape %s, expected [batches,boxes,4]", shape_string(shape_of(boxes)).c_str());
    if (scores.rank != 3 || scores.dims[0] != boxes.dims[0] || scores.dims[2] != boxes.dims[1])
      fail(EDGERT_ERR_SHAPE, "scores has shape %s, expected [%lld,classes,%lld]", shape_string(shape_of(scores)).c_str(),
           static_cast<long long>(boxes.dims[0]), static_cast<long long>(boxes.dims[1]));
    int64_t center_point_box = Attributes(&node).get_int("center_point_box", 0);
    if (center_point_box != 0 && center_point_box != 1)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "center_point_box must be 0 or 1, got %lld", static_cast<long long>(center_point_box));

    auto optional = [&](int i) { return i < node.num_inputs && is_present(in[i]) && numel(in[i]) > 0; };
    int64_t max_per_class = 0;  // absent: nothing is selected (ONNX default)
    if (optional(2)) max_per_class = read_ints(in[2], "max_output_boxes_per_class").at(0);
    float iou_threshold = optional(3) ? static_cast<float>(read_scalar(in[3], "iou_threshold")) : 0.0f;
    bool has_score_threshold = optional(4);
    float score_threshold = has_score_threshold ? static_cast<float>(read_scalar(in[4], "score_threshold")) : 0.0f;
    if (iou_threshold < 0 || iou_threshold > 1)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "iou_threshold must be in [0, 1], got %g", iou_threshold);

    if ((numel(boxes) > 0 && !boxes.data) || (numel(scores) > 0 && !scores.data))
      fail(EDGERT_ERR_NEEDS_DATA, "the number of selected boxes depends on the values of boxes and scores");

    const int64_t batches = boxes.dims[0], classes = scores.dims[1], count = boxes.dims[1];
    const float* box_data = data_as<const float>(boxes);
    const float* score_data = data_as<const float>(scores);
    NmsParams params;
    params.center_point_box = center_point_box != 0;
    params.iou_threshold = iou_threshold;
    params.has_score_threshold = has_score_threshold;
    params.score_threshold = score_threshold;
    params.max_output_boxes = max_per_class;
    selected_.clear();
    for (int64_t b = 0; b < batches && max_per_class > 0; ++b) {
      for (int64_t c = 0; c < classes; ++c) {
        kept_.clear();
        nms_.select(box_data + b * count * 4, score_data + (b * classes + c) * count, count, params, kept_);
        for (int64_t k : kept_) selected_.insert(selected_.end(), {b, c, k});
      }
    }
    set_output(out[0], EDGERT_DTYPE_INT64, {static_cast<int64_t>(selected_.size() / 3), 3});
  }

  void execute(const edgert_node&, const edgert_tensor*, edgert_tensor* out, void*) override {
    if (!selected_.empty()) std::memcpy(out[0].data, selected_.data(), selected_.size() * sizeof(int64_t));
  }

 private:
  SweepNms nms_;
  std::vector<int64_t> kept_;
  std::vector<int64_t> selected_;  // (batch, class, box) triples
};

// RoiAlign: average (or max) of bilinear samples on a regular grid inside each output bin.
class RoiAlignOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    std::string mode = attrs.get_string("mode", "avg");
    if (mode != "avg" && mode != "max") fail(EDGERT_ERR_UNSUPPORTED, "mode '%s' is not supported", mode.c_str());
    max_ = mode == "max";
    // Opset 10 had no attribute and behaved as output_half_pixel; 16 defaults to half_pixel.
    std::string ctm = attrs.get_string("coordinate_transformation_mode", node.opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
      fail(EDGERT_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s' is not supported", ctm.c_str());
    half_pixel_ = ctm == "half_pixel";
    out_h_ = attrs.get_int("output_height", 1);
    out_w_ = attrs.get_int("output_width", 1);
    sampling_ratio_ = attrs.get_int("sampling_ratio", 0);
    spatial_scale_ = attrs.get_float("spatial_scale", 1.0f);
    if (out_h_ <= 0 || out_w_ <= 0 || sampling_ratio_ < 0)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "output_height/output_width must be positive and sampling_ratio >= 0");

    dispatch(in[0].dtype, kFloats, [](auto) {}, "X");
    if (in[1].dtype != in[0].dtype)
      fail(EDGERT_ERR_SHAPE, "rois has dtype %s, X has %s", dtype_name(in[1].dtype), dtype_name(in[0].dtype));
    if (in[2].dtype != EDGERT_DTYPE_INT64)
      fail(EDGERT_ERR_SHAPE, "batch_indices must be int64, got %s", dtype_name(in[2].dtype));
    if (in[0].rank != 4) fail(EDGERT_ERR_SHAPE, "X must be 4-D (N,C,H,W), it is %d-D", in[0].rank);
    if (in[1].rank != 2 || in[1].dims[1] != 4)
      fail(EDGERT_ERR_SHAPE, "rois has shape %s, expected [num_rois,4]", shape_string(shape_of(in[1])).c_str());
    if (in[2].rank != 1 || in[2].dims[0] != in[1].dims[0])
      fail(EDGERT_ERR_SHAPE, "batch_indices has shape %s, expected [%lld]", shape_string(shape_of(in[2])).c_str(),
           static_cast<long long>(in[1].dims[0]));
    set_output(out[0], in[0].dtype, {in[1].dims[0], in[0].dims[1], out_h_, out_w_});
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (is_float_like_v<T>) run<T>(in, out[0]);  // dispatch instantiates every type
    });
  }

 private:
  template <typename T>
  void run(const edgert_tensor* in, edgert_tensor& out) const {
    using C = compute_t<T>;
    const T* x = data_as<const T>(in[0]);
    const T* rois = data_as<const T>(in[1]);
    const int64_t* batch = data_as<const int64_t>(in[2]);
    T* y = data_as<T>(out);
    const int64_t n = in[0].dims[0], channels = in[0].dims[1], h = in[0].dims[2], w = in[0].dims[3];
    const int64_t num_rois = in[1].dims[0];
    const C offset = half_pixel_ ? C(0.5) : C(0);
    const C scale = static_cast<C>(spatial_scale_);
    for (int64_t r = 0; r < num_rois; ++r) {
      if (batch[r] < 0 || batch[r] >= n)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "batch_indices[%lld] = %lld is out of range [0, %lld)", static_cast<long long>(r),
             static_cast<long long>(batch[r]), static_cast<long long>(n));
      const T* roi = rois + r * 4;
      C start_w = static_cast<C>(roi[0]) * scale - offset, start_h = static_cast<C>(roi[1]) * scale - offset;
      C end_w = static_cast<C>(roi[2]) * scale - offset, end_h = static_cast<C>(roi[3]) * scale - offset;
      C roi_w = end_w - start_w, roi_h = end_h - start_h;
      if (!half_pixel_) {  // legacy behaviour: force malformed ROIs to be at least 1x1
        roi_w = std::max(roi_w, C(1));
        roi_h = std::max(roi_h, C(1));
      }
      C bin_h = roi_h / static_cast<C>(out_h_), bin_w = roi_w / static_cast<C>(out_w_);
      int64_t grid_h = sampling_ratio_ > 0 ? sampling_ratio_ : static_cast<int64_t>(std::ceil(roi_h / static_cast<C>(out_h_)));
      int64_t grid_w = sampling_ratio_ > 0 ? sampling_ratio_ : static_cast<int64_t>(std::ceil(roi_w / static_cast<C>(out_w_)));
      grid_h = std::max<int64_t>(grid_h, 0);
      grid_w = std::max<int64_t>(grid_w, 0);
      const C count = static_cast<C>(std::max<int64_t>(grid_h * grid_w, 1));
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = x + (batch[r] * channels + c) * h * w;
        T* dst = y + (r * channels + c) * out_h_ * out_w_;
        for (int64_t ph = 0; ph < out_h_; ++ph) {
          for (int64_t pw = 0; pw < out_w_; ++pw) {
            C acc = 0;
            bool first = true;
            for (int64_t iy = 0; iy < grid_h; ++iy) {
              C yy = start_h + static_cast<C>(ph) * bin_h + (static_cast<C>(iy) + C(0.5)) * bin_h / static_cast<C>(grid_h);
              for (int64_t ix = 0; ix < grid_w; ++ix) {
                C xx = start_w + static_cast<C>(pw) * bin_w + (static_cast<C>(ix) + C(0.5)) * bin_w / static_cast<C>(grid_w);
                C v[4] = {0, 0, 0, 0};
                sample(plane, h, w, yy, xx, v);
                if (max_) {
                  C m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                  acc = first ? m : std::max(acc, m);
                  first = false;
                } else {
                  acc += v[0] + v[1] + v[2] + v[3];
                }
              }
            }
            dst[ph * out_w_ + pw] = static_cast<T>(max_ ? acc : acc / count);
          }
        }
      }
    }
  }

  // The four weighted corner values of a bilinear sample at (y, x); zeros when the point lies
  // more than one pixel outside the map. Max mode takes the max of these weighted values (ONNX Runtime).
  template <typename T, typename C>
  static void sample(const T* plane, int64_t h, int64_t w, C y, C x, C v[4]) {
    if (y < C(-1) || y > static_cast<C>(h) || x < C(-1) || x > static_cast<C>(w)) return;
    if (y <= 0) y = 0;
    if (x <= 0) x = 0;
    int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
    if (y_low >= h - 1) {
      y_high = y_low = h - 1;
      y = static_cast<C>(y_low);
    } else {
      y_high = y_low + 1;
    }
    if (x_low >= w - 1) {
      x_high = x_low = w - 1;
      x = static_cast<C>(x_low);
    } else {
      x_high = x_low + 1;
    }
    C ly = y - static_cast<C>(y_low), lx = x - static_cast<C>(x_low), hy = 1 - ly, hx = 1 - lx;
    auto at = [&](int64_t yi, int64_t xi) { return static_cast<C>(plane[yi * w + xi]); };
    v[0] = hy * hx * at(y_low, x_low);
    v[1] = hy * lx * at(y_low, x_high);
    v[2] = ly * hx * at(y_high, x_low);
    v[3] = ly * lx * at(y_high, x_high);
  }

  bool max_ = false;
  bool half_pixel_ = true;
  int64_t out_h_ = 1, out_w_ = 1, sampling_ratio_ = 0;
  float spatial_scale_ = 1.0f;
};

}  // namespace

void register_detection_kernels(KernelRegistry& r) {
  r.add<NonMaxSuppressionOp>("NonMaxSuppression", "ref-non-max-suppression");
  r.add<RoiAlignOp>("RoiAlign", "ref-roi-align");
}

}  // namespace edgert::cpu

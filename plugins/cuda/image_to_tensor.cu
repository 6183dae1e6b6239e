// edgert.ImageToTensor on the GPU (camera_op.h): a camera engine's first kernel reads the raw
// frame where it lies (host-mapped capture buffers on a Jetson: no copy at all) and writes the
// model's normalized image into the device arena, inside the engine's CUDA graph. One thread
// per output pixel, the same integer arithmetic as the CPU kernel (camera_frame.h).
#include "camera_op.h"
#include "cuda_op.h"

namespace edgert::cuda {
namespace {

__global__ void image_to_tensor(camera::Planes planes, int out_w, int out_h, int channels, bool bgr, bool nchw,
                                camera::Normalization norm, float* __restrict__ y) {
  const int64_t pixel = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t count = static_cast<int64_t>(out_w) * out_h;
  if (pixel >= count) return;
  const int ox = static_cast<int>(pixel % out_w), oy = static_cast<int>(pixel / out_w);
  float values[3];
  camera::output_pixel(planes, ox, oy, out_w, out_h, channels, bgr, norm, values);
  for (int c = 0; c < channels; ++c) {
    if (nchw) y[c * count + pixel] = values[c];
    else y[pixel * channels + c] = values[c];
  }
}

class ImageToTensorOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    op_ = plugin::read_camera_op(node, in[0]);
    set_output(out[0], EDGERT_DTYPE_FLOAT32, op_.output_shape());
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    const int64_t count = static_cast<int64_t>(op_.out_width) * op_.out_height;
    image_to_tensor<<<blocks_for(count), 256, 0, stream>>>(op_.planes(static_cast<const uint8_t*>(in[0].data)),
                                                           op_.out_width, op_.out_height, op_.channels, op_.bgr,
                                                           op_.nchw, op_.norm, static_cast<float*>(out[0].data));
    check_launch("image_to_tensor");
  }

 private:
  plugin::CameraOp op_;
};

}  // namespace

void register_image_kernels(KernelRegistry& r) {
  r.add_in_domain<ImageToTensorOp>("edgert", "ImageToTensor", "cuda-image-to-tensor");
}

}  // namespace edgert::cuda

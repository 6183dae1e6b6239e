// edgert.ImageToTensor on the CPU (camera_op.h): the reference the CUDA kernel is tested
// against, and what a camera engine runs on a board without a GPU.
#include "camera_op.h"
#include "kernel.h"
#include "thread_pool.h"

namespace edgert::cpu {
namespace {

class ImageToTensorOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    op_ = plugin::read_camera_op(node, in[0]);
    set_output(out[0], EDGERT_DTYPE_FLOAT32, op_.output_shape());
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const camera::Planes planes = op_.planes(static_cast<const uint8_t*>(in[0].data));
    float* y = static_cast<float*>(out[0].data);
    const size_t plane = static_cast<size_t>(op_.out_width) * op_.out_height;
    // Rows spread over the pool's threads: a camera engine's first node runs on every frame.
    ThreadPool::instance().parallel_ranges(op_.out_height, [&](int64_t begin, int64_t end, int) {
      float values[3];
      for (int oy = static_cast<int>(begin); oy < end; ++oy)
        for (int ox = 0; ox < op_.out_width; ++ox) {
          camera::output_pixel(planes, ox, oy, op_.out_width, op_.out_height, op_.channels, op_.bgr, op_.norm, values);
          const size_t pixel = static_cast<size_t>(oy) * op_.out_width + ox;
          for (int c = 0; c < op_.channels; ++c) {
            if (op_.nchw) y[c * plane + pixel] = values[c];
            else y[pixel * op_.channels + c] = values[c];
          }
        }
    });
  }

 private:
  plugin::CameraOp op_;
};

}  // namespace

void register_image_kernels(KernelRegistry& r) {
  r.add_in_domain<ImageToTensorOp>("edgert", "ImageToTensor", "ref-image-to-tensor");
}

}  // namespace edgert::cpu

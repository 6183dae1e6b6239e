// The C++ side of a CUDA kernel: an Op class per node, adapted to the C ABI by plugin_entry.cpp,
// as in the CPU plugin (plugins/cpu/kernel.h), with execute enqueuing on a stream.
//
// Kernels run on DEVICE tensors (see runtime/include/edgert/plugin.h): inputs, outputs, the
// workspace and the engine's weights are device pointers, except the inputs a kernel names in
// its host_inputs mask, which it reads on the host in prepare. Every kernel here enqueues
// work only (no allocation, no synchronization in execute), so each is CAPTURABLE.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "edgert/dtype_info.h"
#include "op_support.h"

namespace edgert::cuda {

using plugin::Attributes;
using plugin::fail;
using plugin::is_present;
using plugin::KernelError;
using plugin::normalize_axis;
using plugin::numel;
using plugin::read_ints;
using plugin::set_output;
using plugin::set_shape;
using plugin::Shape;
using plugin::shape_of;
using plugin::shape_string;

// Throws KernelError(EDGERT_ERR_PLUGIN) naming `what` and CUDA's message unless `status` is
// cudaSuccess.
void check_cuda(cudaError_t status, const char* what);
// After a kernel launch: a bad launch configuration is reported here, not at the next sync.
void check_launch(const char* kernel);

// The float types the CUDA kernels compute in (float32 and float16, accumulating in float).
inline bool is_float(edgert_dtype dtype) { return dtype == EDGERT_DTYPE_FLOAT32 || dtype == EDGERT_DTYPE_FLOAT16; }
inline size_t float_size(edgert_dtype dtype) { return dtype == EDGERT_DTYPE_FLOAT16 ? 2 : 4; }

// Tensors of rank 4 may be stored channels-last: a node whose `layout` attribute is "NHWC" reads
// and writes its 4-D activations as [N, H, W, C] while their dims stay [N, C, H, W] (the
// builder's layout pass sets it; constants keep their own layout as the attribute's kernel
// documents).
inline bool channels_last(const edgert_node& node) { return Attributes(&node).get_string("layout", "") == "NHWC"; }

class Op {
 public:
  virtual ~Op() = default;
  void set_tactic(int64_t tactic) { tactic_ = tactic; }
  int64_t tactic() const { return tactic_; }
  // Validate, set every output's dtype and shape, size the workspace (device bytes). Inputs'
  // data is NULL at build time except constants (host pointers then).
  virtual void prepare(const edgert_node& node, const edgert_tensor* inputs, edgert_tensor* outputs,
                       edgert_prepare_info& info) = 0;
  virtual void execute(const edgert_node& node, const edgert_tensor* inputs, edgert_tensor* outputs, void* workspace,
                       cudaStream_t stream) = 0;

 private:
  int64_t tactic_ = 0;
};

struct TacticSpec {
  int64_t id;
  const char* name;  // static storage: dtype-op-variant-library, e.g. "f16-conv-cudnn-implicit-precomp-gemm"
};

using OpFactory = std::unique_ptr<Op> (*)();
using SupportsFn = int32_t (*)(const edgert_node*, const edgert_tensor*);
using TacticsFn = std::vector<TacticSpec> (*)(const edgert_node*, const edgert_tensor*);

struct KernelSpec {
  const char* domain;
  const char* op_type;
  const char* name;
  OpFactory factory;
  SupportsFn supports;   // null: every node of op_type
  TacticsFn tactics;     // null: one tactic, id 0
  uint64_t host_inputs;  // edgert_kernel.host_inputs
};

template <typename OpT>
std::unique_ptr<Op> create_op() {
  return std::make_unique<OpT>();
}

class KernelRegistry {
 public:
  template <typename OpT>
  void add(const char* op_type, const char* name, SupportsFn supports = nullptr, TacticsFn tactics = nullptr,
           uint64_t host_inputs = 0) {
    specs_.push_back({"", op_type, name, &create_op<OpT>, supports, tactics, host_inputs});
  }
  template <typename OpT>
  void add_in_domain(const char* domain, const char* op_type, const char* name, SupportsFn supports = nullptr,
                     TacticsFn tactics = nullptr, uint64_t host_inputs = 0) {
    specs_.push_back({domain, op_type, name, &create_op<OpT>, supports, tactics, host_inputs});
  }
  const std::vector<KernelSpec>& specs() const { return specs_; }

 private:
  std::vector<KernelSpec> specs_;
};

// Grid size for a grid-stride loop over `n` elements.
inline unsigned blocks_for(int64_t n, unsigned threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

}  // namespace edgert::cuda

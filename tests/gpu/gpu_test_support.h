// Checking a CUDA kernel against the CPU plugin's reference kernel, through the plugin ABI as
// the builder and runtime use it (the GPU twin of tests/unit/cpu_tactics_test.cpp).
//
// A GpuCase names an op, its attributes and its inputs (host values; which are constants). run_case:
//   1. loads both plugins ("cpu" and "cuda") from the build's plugin directory;
//   2. picks each plugin's kernel for the op (the first that supports() the node, or the one the
//      case names); the CUDA kernel's supports() must accept the node as the builder shows it
//      (constants' data on the host, activations' data NULL), and its prepare() at build time
//      must succeed with the run's output shapes or report NEEDS_DATA;
//   3. runs the CPU kernel's tactic 0 (the reference) on host memory, in float32 for every
//      float input that follows the case's dtype (float16 cases: on the float16-rounded values);
//   4. runs every tactic the CUDA kernel lists on device memory (cudaMalloc/cudaMemcpy; inputs in
//      its host_inputs mask stay on the host), outputs poisoned first (NaN for float outputs,
//      0x5A bytes for the others), on its own stream, synchronized after execute; with `nhwc`
//      the node carries layout=NHWC, rank-4 inputs (unless `keeps_layout`) go in transposed to
//      [N, H, W, C] and rank-4 outputs come back transposed to NCHW; a tactic other than the
//      first may refuse the node in prepare (EDGERT_ERR_UNSUPPORTED, as a cuDNN algorithm that
//      cannot run it: the builder marks it failed), which is noted, not failed;
//   5. compares every output element: |gpu - ref| <= atol + rtol * |ref| (defaults: 1e-5 and
//      1e-5 for float32, 1e-3 and 1e-2 for float16 outputs (either side's), exact for integers
//      and bool); NaN never passes, so an element left unwritten fails.
// Failures are gtest failures naming the tactic, output and first mismatching elements.
//
// GpuTest is the fixture: without a usable CUDA GPU every test fails with the message that GPU
// tests run on the GPU machine (never skipped). Listing the tests needs no GPU.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>
#include <vector>

#include "edgert/plugin.h"

namespace edgert::gpu_test {

using Dims = std::vector<int64_t>;

// A node with owned attribute storage.
class NodeSpec {
 public:
  NodeSpec() = default;
  NodeSpec(const NodeSpec& other) { *this = other; }
  NodeSpec& operator=(const NodeSpec& other);

  NodeSpec& ints(const char* name, std::vector<int64_t> v);
  NodeSpec& integer(const char* name, int64_t v);
  NodeSpec& real(const char* name, float v);
  NodeSpec& string(const char* name, const std::string& v);
  NodeSpec& floats(const char* name, std::vector<float> v);
  NodeSpec& strings(const char* name, std::vector<std::string> v);

  // The attributes as edgert_attribute views (valid while this object lives unchanged).
  const std::vector<edgert_attribute>& attributes() const { return attrs_; }

 private:
  struct Stored {
    std::string name;
    edgert_attr_type type = EDGERT_ATTR_UNDEFINED;
    int64_t i = 0;
    float f = 0;
    std::string s;
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::vector<std::string> strings;
  };
  void rebuild();

  std::deque<Stored> stored_;
  std::vector<edgert_attribute> attrs_;
  std::deque<std::vector<const char*>> string_pointers_;
};

// A tensor's values on the host: dtype, logical dims, row-major bytes.
struct HostTensor {
  edgert_dtype dtype = EDGERT_DTYPE_FLOAT32;
  Dims dims;
  std::vector<uint8_t> bytes;

  int64_t numel() const;
  size_t element_size() const;
  double at(int64_t i) const;  // element i as double, any numeric dtype or bool

  static HostTensor floats(Dims dims, const std::vector<float>& values);
  static HostTensor halves(Dims dims, const std::vector<float>& values);  // rounded to float16
  static HostTensor int64s(Dims dims, const std::vector<int64_t>& values);
  static HostTensor int32s(Dims dims, const std::vector<int32_t>& values);
  static HostTensor bools(Dims dims, const std::vector<bool>& values);
  // Uniform in [lo, hi), float32.
  static HostTensor random(Dims dims, std::mt19937& rng, float lo = -1.f, float hi = 1.f);
  // Uniform in [lo, hi) with a random sign: magnitudes away from zero (divisors, reciprocals).
  static HostTensor random_signed(Dims dims, std::mt19937& rng, float lo, float hi);

  HostTensor converted(edgert_dtype to) const;  // float32 <-> float16 (round to nearest even)
  HostTensor nchw_to_nhwc() const;              // rank 4 only
  HostTensor nhwc_to_nchw() const;              // rank 4 only
};

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);

struct CaseInput {
  HostTensor tensor;
  bool constant = false;      // known at build time (weights, shape operands): supports() sees its data
  bool follows_dtype = true;  // float32 values run in the case's dtype on the GPU; false: as given to both
  bool keeps_layout = false;  // rank 4 but not transposed under nhwc (convolution weights)
  bool absent = false;        // an optional input left out
  // What the GPU gets instead, already in the layout its kernel reads (e.g. a channels-last
  // dense convolution's [M, KH, KW, C] weights); converted to float16 when it follows the dtype,
  // never transposed. Empty dims: none.
  HostTensor gpu_tensor{EDGERT_DTYPE_UNDEFINED, {}, {}};
};

inline CaseInput input(HostTensor t) { return CaseInput{std::move(t)}; }
inline CaseInput constant(HostTensor t) {
  CaseInput c{std::move(t)};
  c.constant = true;
  return c;
}
// A constant that keeps its own dtype (shapes, axes, scales, indices).
inline CaseInput fixed(HostTensor t) {
  CaseInput c{std::move(t)};
  c.constant = true;
  c.follows_dtype = false;
  return c;
}
inline CaseInput absent() {
  CaseInput c;
  c.absent = true;
  return c;
}

struct GpuCase {
  std::string op_type;
  std::string domain;  // "" = ai.onnx
  int32_t opset = 17;
  NodeSpec attributes;
  std::vector<CaseInput> inputs;
  int32_t num_outputs = 1;
  edgert_dtype dtype = EDGERT_DTYPE_FLOAT32;  // float32 or float16: what following inputs run in on the GPU
  bool nhwc = false;
  std::string cpu_kernel, cuda_kernel;  // empty: the plugin's kernel for op_type that supports the node
  double atol = -1, rtol = -1;          // float32 outputs; < 0: 1e-5 each
  double half_atol = -1, half_rtol = -1;  // float16 outputs; < 0: 1e-3 and 1e-2
  bool in_place = false;                // the GPU output 0 is input 0's device memory (the planner's in-place run)
  std::string label;                    // shown in failures
};

// Runs the case as the header comment says; reports through gtest (EXPECT/ADD_FAILURE).
void run_case(const GpuCase& c);

// A case of `op` on `inputs` with `attributes`, at `opset`.
GpuCase make_case(const std::string& op, std::vector<CaseInput> inputs, NodeSpec attributes, int32_t opset);
// Runs the case in float32, then in float16.
void run_float32_and_float16(GpuCase c);

// Microseconds per execute() of the CUDA kernel's first tactic on the case's inputs (CUDA events
// around `iterations` back-to-back runs on one stream, after one warm-up); no reference run, no
// comparison. Negative when the kernel cannot run the case (a gtest failure says why).
double time_cuda_kernel(const GpuCase& c, int iterations);

// Empty when a CUDA GPU is usable here, else why not.
std::string gpu_unavailable_reason();

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;
};

}  // namespace edgert::gpu_test

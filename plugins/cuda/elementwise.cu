// Element-wise ops on the GPU: broadcasting binary arithmetic (Add, Sub, Mul, Div, Pow, PRelu),
// unary math and activations, the builder's edgert.PointwiseChain, Cast, the pass-through ops
// Identity and Dropout, and the per-channel epilogues of epilogue.h.
//
// Float32 and float16 compute in float and round once per element (a chain rounds once at its
// end: float32 results equal the CPU plugin's step-by-step float rounding). Add, Sub, Mul and
// Div also take int32 and int64 (shape arithmetic), wrapping on overflow like the CPU plugin.
//
// Binary ops walk the output in storage order. With layout NHWC the node's rank-4 operands are
// channels-last (a [N, C, 1, 1] operand has the same bytes either way), operands of lower rank
// are plain row-major and broadcast against the logical dims; supports() refuses a rank-4
// constant with H or W other than 1, whose bytes the builder would not have transposed.
#include <limits>
#include <string>
#include <type_traits>

#include "activation.cuh"
#include "cuda_op.h"
#include "edgert/dtype_info.h"
#include "epilogue.h"
#include "grid.cuh"
#include "host_operands.h"
#include "layout.h"
#include "strided_walk.cuh"

namespace edgert::cuda {
namespace {

constexpr unsigned kThreads = 256;

// float32 and float16 compute in float (activation.cuh's to_float / from_float); the integer
// types of shape arithmetic in their own type.
template <typename T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, __half>;

// Binary arithmetic

enum class BinaryKind : int { Add, Sub, Mul, Div, Pow, PRelu };

__device__ __forceinline__ float binary_float(BinaryKind k, float a, float b) {
  switch (k) {
    case BinaryKind::Add: return a + b;
    case BinaryKind::Sub: return a - b;
    case BinaryKind::Mul: return a * b;
    case BinaryKind::Div: return a / b;
    case BinaryKind::Pow: return powf(a, b);
    case BinaryKind::PRelu: return a < 0.f ? a * b : a;
  }
  return a;
}

// Integer +, -, * wrap (through the unsigned type, as the CPU plugin and numpy); division by
// zero gives 0 as in the CPU reference.
template <typename I>
__device__ __forceinline__ I binary_int(BinaryKind k, I a, I b) {
  using U = std::make_unsigned_t<I>;
  switch (k) {
    case BinaryKind::Add: return static_cast<I>(static_cast<U>(a) + static_cast<U>(b));
    case BinaryKind::Sub: return static_cast<I>(static_cast<U>(a) - static_cast<U>(b));
    case BinaryKind::Mul: return static_cast<I>(static_cast<U>(a) * static_cast<U>(b));
    case BinaryKind::Div: return b == 0 ? I(0) : a / b;
    default: return a;  // Pow and PRelu take float types only (prepare refuses the rest)
  }
}

template <typename T>
__device__ __forceinline__ T binary_value(BinaryKind k, T a, T b) {
  if constexpr (kIsFloat<T>) return from_float<T>(binary_float(k, to_float(a), to_float(b)));
  else return binary_int<T>(k, a, b);
}

// Same shapes, or one operand a single element (step 0).
template <typename T>
__global__ void binary_flat(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int64_t n,
                            int64_t a_step, int64_t b_step, BinaryKind k) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    c[i] = binary_value<T>(k, a[i * a_step], b[i * b_step]);
}

// Same shapes, 16-byte aligned, a multiple of 16 bytes: one 16-byte load per operand.
template <typename T>
__global__ void binary_vector(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ c,
                              int64_t vectors, BinaryKind k) {
  constexpr int kLanes = sizeof(uint4) / sizeof(T);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vectors;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint4 va = a[i], vb = b[i], vc;
    const T* pa = reinterpret_cast<const T*>(&va);
    const T* pb = reinterpret_cast<const T*>(&vb);
    T* pc = reinterpret_cast<T*>(&vc);
#pragma unroll
    for (int j = 0; j < kLanes; ++j) pc[j] = binary_value<T>(k, pa[j], pb[j]);
    c[i] = vc;
  }
}

// Any broadcast: operand 0 is the output, 1 and 2 the inputs.
template <typename T>
__global__ void binary_broadcast(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int64_t n,
                                 StridedWalk<3> walk, BinaryKind k) {
  grid_stride(n, [&](auto i) {
    int64_t off[3];
    walk.offsets(i, off);
    c[off[0]] = binary_value<T>(k, a[off[1]], b[off[2]]);
  });
}

BinaryKind binary_kind(const std::string& op) {
  if (op == "Add") return BinaryKind::Add;
  if (op == "Sub") return BinaryKind::Sub;
  if (op == "Mul") return BinaryKind::Mul;
  if (op == "Div") return BinaryKind::Div;
  if (op == "Pow") return BinaryKind::Pow;
  if (op == "PRelu") return BinaryKind::PRelu;
  fail(EDGERT_ERR_UNSUPPORTED, "'%s' is not a binary op of this kernel", op.c_str());
}

bool binary_dtype_ok(BinaryKind k, edgert_dtype d) {
  if (is_float(d)) return true;
  const bool integer = d == EDGERT_DTYPE_INT32 || d == EDGERT_DTYPE_INT64;
  return integer && k != BinaryKind::Pow && k != BinaryKind::PRelu;
}

// The ONNX broadcast of two shapes; fails naming both.
Shape broadcast_shape(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      fail(EDGERT_ERR_SHAPE, "shapes %s and %s cannot be broadcast together", shape_string(a).c_str(),
           shape_string(b).c_str());
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides of `input` (stored as `nhwc` says for its rank) over the logical axes of `out`,
// right-aligned, 0 on broadcast axes.
std::vector<int64_t> broadcast_strides(const Shape& input, const Shape& out, bool nhwc) {
  std::vector<int64_t> own = storage_strides(input, nhwc);
  std::vector<int64_t> strides(out.size(), 0);
  const size_t shift = out.size() - input.size();
  for (size_t i = 0; i < input.size(); ++i) strides[shift + i] = input[i] == 1 ? 0 : own[i];
  return strides;
}

int32_t binary_supports(const edgert_node* node, const edgert_tensor* in) {
  const BinaryKind k = binary_kind(node->op_type);
  if (node->num_inputs != 2 || node->num_outputs != 1) return 0;
  for (int i = 0; i < 2; ++i) {
    if (in[i].dtype != EDGERT_DTYPE_UNDEFINED && !binary_dtype_ok(k, in[i].dtype)) return 0;
    if (in[i].rank > EDGERT_MAX_RANK) return 0;
  }
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && in[1].dtype != EDGERT_DTYPE_UNDEFINED && in[0].dtype != in[1].dtype)
    return 0;
  if (channels_last(*node)) {
    for (int i = 0; i < 2; ++i)  // a rank-4 constant keeps NCHW bytes: only H = W = 1 reads the same
      if (in[i].data && in[i].rank == 4 && (in[i].dims[2] != 1 || in[i].dims[3] != 1)) return 0;
  }
  return 1;
}

class BinaryOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    kind_ = binary_kind(node.op_type);
    dtype_ = in[0].dtype;
    if (in[1].dtype != dtype_)
      fail(EDGERT_ERR_SHAPE, "inputs have different dtypes (%s and %s)", edgert_dtype_name(dtype_),
           edgert_dtype_name(in[1].dtype));
    if (!binary_dtype_ok(kind_, dtype_))
      fail(EDGERT_ERR_UNSUPPORTED, "dtype %s is not supported by %s on the GPU", edgert_dtype_name(dtype_),
           node.op_type);
    const Shape sa = shape_of(in[0]), sb = shape_of(in[1]);
    const Shape so = broadcast_shape(sa, sb);
    const int64_t rank = static_cast<int64_t>(so.size());
    const bool nhwc = channels_last(node);
    if (nhwc && rank != 4 && (sa.size() == 4 || sb.size() == 4))
      fail(EDGERT_ERR_UNSUPPORTED, "layout NHWC with a rank-4 operand and a rank-%lld output",
           static_cast<long long>(rank));
    set_output(out[0], dtype_, so);
    n_ = numel(so);

    // Walk the output in its storage order: logical axis of each storage position.
    const std::vector<int64_t> so_strides = storage_strides(so, nhwc);
    const std::vector<int64_t> sa_strides = broadcast_strides(sa, so, nhwc);
    const std::vector<int64_t> sb_strides = broadcast_strides(sb, so, nhwc);
    Shape dims(so.size());
    std::array<std::vector<int64_t>, 3> strides;
    for (auto& s : strides) s.resize(so.size());
    for (int64_t p = 0; p < rank; ++p) {
      const size_t axis = static_cast<size_t>(logical_axis(p, rank, nhwc));
      dims[static_cast<size_t>(p)] = so[axis];
      strides[0][static_cast<size_t>(p)] = so_strides[axis];
      strides[1][static_cast<size_t>(p)] = sa_strides[axis];
      strides[2][static_cast<size_t>(p)] = sb_strides[axis];
    }
    walk_ = StridedWalk<3>::make(dims, strides);
    // Flat when each input is either walked densely or a single element.
    const bool a_flat = walk_.dense(1) || numel(sa) == 1, b_flat = walk_.dense(2) || numel(sb) == 1;
    flat_ = walk_.dense(0) && a_flat && b_flat;
    a_step_ = numel(sa) == 1 ? 0 : 1;
    b_step_ = numel(sb) == 1 ? 0 : 1;
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (n_ == 0) return;
    switch (dtype_) {
      case EDGERT_DTYPE_FLOAT32: return run<float>(in, out, stream);
      case EDGERT_DTYPE_FLOAT16: return run<__half>(in, out, stream);
      case EDGERT_DTYPE_INT32: return run<int32_t>(in, out, stream);
      default: return run<int64_t>(in, out, stream);
    }
  }

 private:
  template <typename T>
  void run(const edgert_tensor* in, edgert_tensor* out, cudaStream_t stream) {
    const T* a = static_cast<const T*>(in[0].data);
    const T* b = static_cast<const T*>(in[1].data);
    T* c = static_cast<T*>(out[0].data);
    if (flat_) {
      if constexpr (kIsFloat<T>) {
        constexpr int64_t kLanes = sizeof(uint4) / sizeof(T);
        auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % sizeof(uint4) == 0; };
        if (a_step_ == 1 && b_step_ == 1 && n_ % kLanes == 0 && aligned(a) && aligned(b) && aligned(c)) {
          const int64_t vectors = n_ / kLanes;
          binary_vector<T><<<blocks_for(vectors, kThreads), kThreads, 0, stream>>>(
              reinterpret_cast<const uint4*>(a), reinterpret_cast<const uint4*>(b), reinterpret_cast<uint4*>(c),
              vectors, kind_);
          return check_launch("binary_vector");
        }
      }
      binary_flat<T><<<blocks_for(n_, kThreads), kThreads, 0, stream>>>(a, b, c, n_, a_step_, b_step_, kind_);
      return check_launch("binary_flat");
    }
    binary_broadcast<T><<<blocks_for(n_, kThreads), kThreads, 0, stream>>>(a, b, c, n_, walk_, kind_);
    check_launch("binary_broadcast");
  }

  BinaryKind kind_ = BinaryKind::Add;
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  int64_t n_ = 0, a_step_ = 1, b_step_ = 1;
  bool flat_ = true;
  StridedWalk<3> walk_;
};

// Unary math, activations and PointwiseChain: one program of up to kMaxSteps steps per element.

enum class StepKind : int {
  Activation,  // activation.cuh's apply (Relu, Sigmoid, Tanh, HardSigmoid, HardSwish, LeakyRelu, Gelu, SiLU)
  Add, Sub, Mul, Div, RSub, RDiv,  // x op p0, or p0 op x
  Clip,                            // p0, p1 with the CPU plugin's rule: max wins when min > max
  Erf, Exp, Log, Sqrt, Neg, Abs, Reciprocal, Softplus, Softsign, Elu, Selu, Celu, Mish, ThresholdedRelu,
  Floor, Ceil, Round, Sign, Sin, Cos
};

struct Step {
  StepKind kind = StepKind::Activation;
  float p0 = 0, p1 = 0;
  Activation activation;
};

constexpr int kMaxSteps = 16;

struct Chain {
  int count = 0;
  Step steps[kMaxSteps];
};

__device__ __forceinline__ float softplus(float x) { return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

__device__ float run_step(const Step& s, float x) {
  switch (s.kind) {
    case StepKind::Activation: return apply(s.activation, x);
    case StepKind::Add: return x + s.p0;
    case StepKind::Sub: return x - s.p0;
    case StepKind::Mul: return x * s.p0;
    case StepKind::Div: return x / s.p0;
    case StepKind::RSub: return s.p0 - x;
    case StepKind::RDiv: return s.p0 / x;
    case StepKind::Clip: {  // NaN passes through, as numpy.clip
      float v = x;
      if (v < s.p0) v = s.p0;
      if (v > s.p1) v = s.p1;
      return v;
    }
    case StepKind::Erf: return erff(x);
    case StepKind::Exp: return expf(x);
    case StepKind::Log: return logf(x);
    case StepKind::Sqrt: return sqrtf(x);
    case StepKind::Neg: return -x;
    case StepKind::Abs: return fabsf(x);
    case StepKind::Reciprocal: return 1.f / x;
    case StepKind::Softplus: return softplus(x);
    case StepKind::Softsign: return x / (1.f + fabsf(x));
    case StepKind::Elu: return x >= 0.f ? x : s.p0 * expm1f(x);
    case StepKind::Selu: return x > 0.f ? s.p1 * x : s.p1 * s.p0 * expm1f(x);
    case StepKind::Celu: return fmaxf(0.f, x) + fminf(0.f, s.p0 * expm1f(x / s.p0));
    case StepKind::Mish: return x * tanhf(softplus(x));
    case StepKind::ThresholdedRelu: return x > s.p0 ? x : 0.f;
    case StepKind::Floor: return floorf(x);
    case StepKind::Ceil: return ceilf(x);
    case StepKind::Round: return rintf(x);  // half to even
    case StepKind::Sign: return x > 0.f ? 1.f : (x < 0.f ? -1.f : x);  // keeps 0 and NaN
    case StepKind::Sin: return sinf(x);
    case StepKind::Cos: return cosf(x);
  }
  return x;
}

__device__ __forceinline__ float run_chain(const Chain& chain, float x) {
  for (int j = 0; j < chain.count; ++j) x = run_step(chain.steps[j], x);
  return x;
}

template <typename T>
__global__ void pointwise_flat(const T* __restrict__ x, T* __restrict__ y, int64_t n, Chain chain) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = from_float<T>(run_chain(chain, to_float(x[i])));
}

template <typename T>
__global__ void pointwise_vector(const uint4* __restrict__ x, uint4* __restrict__ y, int64_t vectors, Chain chain) {
  constexpr int kLanes = sizeof(uint4) / sizeof(T);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vectors;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint4 v = x[i];
    T* lanes = reinterpret_cast<T*>(&v);
#pragma unroll
    for (int j = 0; j < kLanes; ++j) lanes[j] = from_float<T>(run_chain(chain, to_float(lanes[j])));
    y[i] = v;
  }
}

template <typename T>
void launch_pointwise(const void* x, void* y, int64_t n, const Chain& chain, cudaStream_t stream) {
  constexpr int64_t kLanes = sizeof(uint4) / sizeof(T);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % sizeof(uint4) == 0; };
  if (n % kLanes == 0 && aligned(x) && aligned(y)) {
    const int64_t vectors = n / kLanes;
    pointwise_vector<T><<<blocks_for(vectors, kThreads), kThreads, 0, stream>>>(
        static_cast<const uint4*>(x), static_cast<uint4*>(y), vectors, chain);
    return check_launch("pointwise_vector");
  }
  pointwise_flat<T><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n,
                                                                      chain);
  check_launch("pointwise_flat");
}

Step activation_step(ActivationKind kind, float p0 = 0, float p1 = 0) {
  Step s;
  s.activation.kind = kind;
  s.activation.p0 = p0;
  s.activation.p1 = p1;
  return s;
}

Step math_step(StepKind kind, float p0 = 0, float p1 = 0) {
  Step s;
  s.kind = kind;
  s.p0 = p0;
  s.p1 = p1;
  return s;
}

// The step of a plain unary op; Clip's bounds are filled in by the op.
Step unary_step(const edgert_node& node) {
  const Attributes a(&node);
  const std::string op = node.op_type;
  if (op == "Relu") return activation_step(ActivationKind::Relu);
  if (op == "Sigmoid") return activation_step(ActivationKind::Sigmoid);
  if (op == "Tanh") return activation_step(ActivationKind::Tanh);
  if (op == "HardSwish") return activation_step(ActivationKind::HardSwish);
  if (op == "LeakyRelu") return activation_step(ActivationKind::LeakyRelu, a.get_float("alpha", 0.01f));
  if (op == "HardSigmoid")
    return activation_step(ActivationKind::HardSigmoid, a.get_float("alpha", 0.2f), a.get_float("beta", 0.5f));
  if (op == "Gelu") {
    const std::string approximate = a.get_string("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      fail(EDGERT_ERR_INVALID_ARGUMENT, "approximate must be 'none' or 'tanh', got '%s'", approximate.c_str());
    return activation_step(ActivationKind::Gelu, approximate == "tanh" ? 1.f : 0.f);
  }
  if (op == "Clip") return math_step(StepKind::Clip);
  if (op == "Erf") return math_step(StepKind::Erf);
  if (op == "Exp") return math_step(StepKind::Exp);
  if (op == "Log") return math_step(StepKind::Log);
  if (op == "Sqrt") return math_step(StepKind::Sqrt);
  if (op == "Neg") return math_step(StepKind::Neg);
  if (op == "Abs") return math_step(StepKind::Abs);
  if (op == "Reciprocal") return math_step(StepKind::Reciprocal);
  if (op == "Softplus") return math_step(StepKind::Softplus);
  if (op == "Softsign") return math_step(StepKind::Softsign);
  if (op == "Elu") return math_step(StepKind::Elu, a.get_float("alpha", 1.f));
  if (op == "Selu")
    return math_step(StepKind::Selu, a.get_float("alpha", 1.67326319217681884765625f),
                     a.get_float("gamma", 1.05070102214813232421875f));
  if (op == "Celu") return math_step(StepKind::Celu, a.get_float("alpha", 1.f));
  if (op == "Mish") return math_step(StepKind::Mish);
  if (op == "ThresholdedRelu") return math_step(StepKind::ThresholdedRelu, a.get_float("alpha", 1.f));
  if (op == "Floor") return math_step(StepKind::Floor);
  if (op == "Ceil") return math_step(StepKind::Ceil);
  if (op == "Round") return math_step(StepKind::Round);
  if (op == "Sign") return math_step(StepKind::Sign);
  if (op == "Sin") return math_step(StepKind::Sin);
  if (op == "Cos") return math_step(StepKind::Cos);
  fail(EDGERT_ERR_UNSUPPORTED, "'%s' is not a unary op of this kernel", op.c_str());
}

// PointwiseChain's `ops` / `params` (builder/src/passes/pointwise_fusion.cpp) as steps.
Chain parse_chain(const edgert_node& node) {
  const Attributes attrs(&node);
  const std::vector<std::string> ops = attrs.get_strings("ops");
  const std::vector<float> params = attrs.get_floats("params");
  if (ops.empty() || params.size() != 2 * ops.size())
    fail(EDGERT_ERR_INVALID_ARGUMENT, "%zu ops need %zu params, got %zu", ops.size(), 2 * ops.size(), params.size());
  if (ops.size() > static_cast<size_t>(kMaxSteps))
    fail(EDGERT_ERR_UNSUPPORTED, "a chain of %zu steps exceeds the supported %d", ops.size(), kMaxSteps);
  Chain chain;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string& op = ops[i];
    const float p0 = params[2 * i], p1 = params[2 * i + 1];
    Step s;
    if (op == "Add") s = math_step(StepKind::Add, p0);
    else if (op == "Sub") s = math_step(StepKind::Sub, p0);
    else if (op == "Mul") s = math_step(StepKind::Mul, p0);
    else if (op == "Div") s = math_step(StepKind::Div, p0);
    else if (op == "RSub") s = math_step(StepKind::RSub, p0);
    else if (op == "RDiv") s = math_step(StepKind::RDiv, p0);
    else if (op == "Clip") s = math_step(StepKind::Clip, p0, p1);
    else s.activation = Activation::parse(op, &params[2 * i], 2);
    chain.steps[chain.count++] = s;
  }
  return chain;
}

int32_t float_input_supports(const edgert_node*, const edgert_tensor* in) {
  return in[0].dtype == EDGERT_DTYPE_UNDEFINED || is_float(in[0].dtype);
}

int32_t chain_supports(const edgert_node* node, const edgert_tensor* in) {
  if (!float_input_supports(node, in)) return 0;
  parse_chain(*node);  // throws (refused by the adapter) on unknown steps or too long a chain
  return 1;
}

int32_t clip_supports(const edgert_node* node, const edgert_tensor* in) {
  if (!float_input_supports(node, in)) return 0;
  for (int i = 1; i < node->num_inputs && i < 3; ++i)
    if (in[i].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[i].dtype)) return 0;
  return 1;
}

class PointwiseOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    if (!is_float(in[0].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "input is %s; the GPU kernel takes float32 and float16", edgert_dtype_name(in[0].dtype));
    dtype_ = in[0].dtype;
    const std::string op = node.op_type;
    if (op == "PointwiseChain") {
      chain_ = parse_chain(node);
    } else {
      chain_ = Chain{};
      Step s = unary_step(node);
      if (s.kind == StepKind::Clip) read_clip_bounds(node, in, s, info);
      chain_.steps[chain_.count++] = s;
    }
    set_output(out[0], dtype_, shape_of(in[0]));
    n_ = numel(in[0]);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (n_ == 0) return;
    if (dtype_ == EDGERT_DTYPE_FLOAT16) launch_pointwise<__half>(in[0].data, out[0].data, n_, chain_, stream);
    else launch_pointwise<float>(in[0].data, out[0].data, n_, chain_, stream);
  }

 private:
  // Bounds are attributes before opset 11, optional scalar inputs (read on the host) from 11 on.
  static void read_clip_bounds(const edgert_node& node, const edgert_tensor* in, Step& s, edgert_prepare_info& info) {
    const float inf = std::numeric_limits<float>::infinity();
    if (node.opset < 11) {
      const Attributes a(&node);
      s.p0 = a.get_float("min", -inf);
      s.p1 = a.get_float("max", inf);
      return;
    }
    s.p0 = -inf;
    s.p1 = inf;
    for (int i = 1; i < node.num_inputs && i < 3; ++i) {
      if (!is_present(in[i])) continue;
      const char* what = i == 1 ? "min" : "max";
      if (numel(in[i]) != 1)
        fail(EDGERT_ERR_SHAPE, "%s must be a scalar, it has shape %s", what, shape_string(shape_of(in[i])).c_str());
      info.data_dependent = 1;  // read again before every run: the bound may be computed
      (i == 1 ? s.p0 : s.p1) = static_cast<float>(read_floats(in[i], what)[0]);
    }
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  int64_t n_ = 0;
  Chain chain_;
};

// Identity and inference Dropout: a device copy, skipped when the planner ran the op in place.

void copy_tensor(const edgert_tensor& in, edgert_tensor& out, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(numel(in)) * edgert_dtype_size(in.dtype);
  if (bytes == 0 || out.data == in.data) return;
  check_cuda(cudaMemcpyAsync(out.data, in.data, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
}

int32_t copy_supports(const edgert_node* node, const edgert_tensor* in) {
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && edgert_dtype_size(in[0].dtype) == 0) return 0;
  return node->num_outputs == 1;  // Dropout's mask output is not produced
}

class CopyOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    if (edgert_dtype_size(in[0].dtype) == 0)
      fail(EDGERT_ERR_UNSUPPORTED, "input dtype %s cannot be copied", edgert_dtype_name(in[0].dtype));
    if (node.num_outputs > 1) fail(EDGERT_ERR_UNSUPPORTED, "Dropout's mask output is not supported on the GPU");
    if (std::string(node.op_type) == "Dropout") check_inference(node, in, info);
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    copy_tensor(in[0], out[0], stream);
  }

 private:
  // Training-mode Dropout with a non-zero ratio needs a random mask: refused. ratio and
  // training_mode (opset 12+) are read on the host.
  static void check_inference(const edgert_node& node, const edgert_tensor* in, edgert_prepare_info& info) {
    bool training = false;
    double ratio = 0.5;
    if (node.opset < 7) {
      const Attributes a(&node);
      training = a.get_int("is_test", 0) == 0;
      ratio = a.get_float("ratio", 0.5f);
    } else if (node.opset >= 12 && node.num_inputs > 2 && is_present(in[2])) {
      info.data_dependent = 1;
      if (!in[2].data) fail(EDGERT_ERR_NEEDS_DATA, "values of training_mode are not known yet");
      training = in[2].dtype == EDGERT_DTYPE_BOOL ? *static_cast<const uint8_t*>(in[2].data) != 0
                                                  : read_ints(in[2], "training_mode").at(0) != 0;
      if (training && node.num_inputs > 1 && is_present(in[1])) ratio = read_floats(in[1], "ratio").at(0);
    }
    if (training && ratio != 0)
      fail(EDGERT_ERR_UNSUPPORTED, "training-mode Dropout with a non-zero ratio needs a random mask, which this kernel "
                                   "does not generate");
  }
};

// Cast: float32 <-> float16 by a typed kernel; every other pair of fixed-size types (not
// bfloat16) by one kernel switching on both dtypes, with the CPU plugin's rules: float ->
// integer truncates toward zero and wraps modulo 2^bits within the int64 range, saturates
// beyond it, NaN -> 0; anything -> bool is x != 0 (NaN is true).

bool castable(edgert_dtype d) {
  switch (d) {
    case EDGERT_DTYPE_FLOAT32: case EDGERT_DTYPE_FLOAT16: case EDGERT_DTYPE_FLOAT64:
    case EDGERT_DTYPE_INT8: case EDGERT_DTYPE_UINT8: case EDGERT_DTYPE_INT16: case EDGERT_DTYPE_UINT16:
    case EDGERT_DTYPE_INT32: case EDGERT_DTYPE_UINT32: case EDGERT_DTYPE_INT64: case EDGERT_DTYPE_UINT64:
    case EDGERT_DTYPE_BOOL:
      return true;
    default:
      return false;
  }
}

template <typename S, typename D>
__global__ void cast_float(const S* __restrict__ x, D* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = from_float<D>(to_float(x[i]));
}

// A loaded element: a float value, or an integer (uint64 as its bits, `unsigned_64` set).
struct Scalar {
  bool is_float;
  bool unsigned_64;
  double f;
  int64_t i;
};

__device__ Scalar load_scalar(const void* p, int64_t k, edgert_dtype d) {
  Scalar s{false, false, 0.0, 0};
  switch (d) {
    case EDGERT_DTYPE_FLOAT32: s.is_float = true; s.f = static_cast<const float*>(p)[k]; break;
    case EDGERT_DTYPE_FLOAT16: s.is_float = true; s.f = __half2float(static_cast<const __half*>(p)[k]); break;
    case EDGERT_DTYPE_FLOAT64: s.is_float = true; s.f = static_cast<const double*>(p)[k]; break;
    case EDGERT_DTYPE_INT8: s.i = static_cast<const int8_t*>(p)[k]; break;
    case EDGERT_DTYPE_UINT8: s.i = static_cast<const uint8_t*>(p)[k]; break;
    case EDGERT_DTYPE_INT16: s.i = static_cast<const int16_t*>(p)[k]; break;
    case EDGERT_DTYPE_UINT16: s.i = static_cast<const uint16_t*>(p)[k]; break;
    case EDGERT_DTYPE_INT32: s.i = static_cast<const int32_t*>(p)[k]; break;
    case EDGERT_DTYPE_UINT32: s.i = static_cast<const uint32_t*>(p)[k]; break;
    case EDGERT_DTYPE_INT64: s.i = static_cast<const int64_t*>(p)[k]; break;
    case EDGERT_DTYPE_UINT64: s.unsigned_64 = true; s.i = static_cast<int64_t>(static_cast<const uint64_t*>(p)[k]); break;
    default: s.i = static_cast<const uint8_t*>(p)[k] != 0; break;  // bool
  }
  return s;
}

// The integer type D an element converts to: a float truncates toward zero and wraps modulo
// 2^bits while inside the int64 range (uint64 for a uint64 target), else saturates to D's bounds.
template <typename D>
__device__ D to_integer(const Scalar& s) {
  if (!s.is_float) return static_cast<D>(s.i);
  if (isnan(s.f)) return D(0);
  const double two63 = 9223372036854775808.0;
  const double t = trunc(s.f);
  if (t >= -two63 && t < two63) return static_cast<D>(static_cast<int64_t>(t));
  if constexpr (std::is_same_v<D, uint64_t>)
    if (t >= 0 && t < 2 * two63) return static_cast<D>(static_cast<uint64_t>(t));
  return t < 0 ? std::numeric_limits<D>::lowest() : std::numeric_limits<D>::max();
}

__device__ double float_value(const Scalar& s) {
  if (s.is_float) return s.f;
  return s.unsigned_64 ? static_cast<double>(static_cast<uint64_t>(s.i)) : static_cast<double>(s.i);
}

__global__ void cast_any(const void* __restrict__ x, void* __restrict__ y, int64_t n, edgert_dtype from,
                         edgert_dtype to) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Scalar s = load_scalar(x, k, from);
    switch (to) {
      case EDGERT_DTYPE_FLOAT32: static_cast<float*>(y)[k] = static_cast<float>(float_value(s)); break;
      case EDGERT_DTYPE_FLOAT16: static_cast<__half*>(y)[k] = __double2half(float_value(s)); break;
      case EDGERT_DTYPE_FLOAT64: static_cast<double*>(y)[k] = float_value(s); break;
      case EDGERT_DTYPE_BOOL: static_cast<uint8_t*>(y)[k] = s.is_float ? s.f != 0.0 : s.i != 0; break;
      case EDGERT_DTYPE_INT8: static_cast<int8_t*>(y)[k] = to_integer<int8_t>(s); break;
      case EDGERT_DTYPE_UINT8: static_cast<uint8_t*>(y)[k] = to_integer<uint8_t>(s); break;
      case EDGERT_DTYPE_INT16: static_cast<int16_t*>(y)[k] = to_integer<int16_t>(s); break;
      case EDGERT_DTYPE_UINT16: static_cast<uint16_t*>(y)[k] = to_integer<uint16_t>(s); break;
      case EDGERT_DTYPE_INT32: static_cast<int32_t*>(y)[k] = to_integer<int32_t>(s); break;
      case EDGERT_DTYPE_UINT32: static_cast<uint32_t*>(y)[k] = to_integer<uint32_t>(s); break;
      case EDGERT_DTYPE_INT64: static_cast<int64_t*>(y)[k] = to_integer<int64_t>(s); break;
      default: static_cast<uint64_t*>(y)[k] = to_integer<uint64_t>(s); break;  // uint64
    }
  }
}

int32_t cast_supports(const edgert_node* node, const edgert_tensor* in) {
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && !castable(in[0].dtype)) return 0;
  return castable(static_cast<edgert_dtype>(Attributes(node).get_int("to", 0)));
}

class CastOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const Attributes a(&node);
    if (!a.has("to")) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'to' is required");
    from_ = in[0].dtype;
    to_ = static_cast<edgert_dtype>(a.get_int("to", 0));
    if (!castable(from_) || !castable(to_))
      fail(EDGERT_ERR_UNSUPPORTED, "cast from %s to %s is not supported on the GPU", edgert_dtype_name(from_),
           edgert_dtype_name(to_));
    set_output(out[0], to_, shape_of(in[0]));
    n_ = numel(in[0]);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (n_ == 0) return;
    if (from_ == to_) return copy_tensor(in[0], out[0], stream);
    const unsigned blocks = blocks_for(n_, kThreads);
    if (from_ == EDGERT_DTYPE_FLOAT32 && to_ == EDGERT_DTYPE_FLOAT16) {
      cast_float<float, __half><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(in[0].data),
                                                                 static_cast<__half*>(out[0].data), n_);
    } else if (from_ == EDGERT_DTYPE_FLOAT16 && to_ == EDGERT_DTYPE_FLOAT32) {
      cast_float<__half, float><<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(in[0].data),
                                                                 static_cast<float*>(out[0].data), n_);
    } else {
      cast_any<<<blocks, kThreads, 0, stream>>>(in[0].data, out[0].data, n_, from_, to_);
    }
    check_launch("cast");
  }

 private:
  edgert_dtype from_ = EDGERT_DTYPE_FLOAT32, to_ = EDGERT_DTYPE_FLOAT32;
  int64_t n_ = 0;
};

// Epilogues (epilogue.h)

template <typename T>
__global__ void bias_activation(T* y, const T* __restrict__ bias, const T* residual, int64_t total, int64_t c,
                                int64_t spatial, bool channels_last, Activation act) {
  grid_stride(total, [&](auto i) {
    using I = decltype(i);
    float v = to_float(y[i]);
    if (bias) v += to_float(bias[channels_last ? i % static_cast<I>(c) : i / static_cast<I>(spatial) % static_cast<I>(c)]);
    if (residual) v += to_float(residual[i]);
    y[i] = from_float<T>(apply(act, v));
  });
}

// An activation alone, in place, 8 float16 a thread in 16-byte loads and stores: the epilogue of
// a product whose activation cuBLASLt's does not apply (GELU after a transformer's first MLP
// product), memory-bound, where one element a thread took 1.7 times as long.
__global__ void activation_half_x8(__half* y, int64_t chunks, Activation act) {
  grid_stride(chunks, [&](auto i) {
    uint4 v = reinterpret_cast<const uint4*>(y)[i];
    __half2* h = reinterpret_cast<__half2*>(&v);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __half22float2(h[e]);
      h[e] = __floats2half2_rn(apply(act, f.x), apply(act, f.y));
    }
    reinterpret_cast<uint4*>(y)[i] = v;
  });
}

template <typename T>
__global__ void channel_scale(const T* x, const T* __restrict__ scale, T* y, int64_t total, int64_t c, int64_t spatial,
                              bool channels_last) {
  grid_stride(total, [&](auto i) {
    using I = decltype(i);
    const I cc = static_cast<I>(c), s = static_cast<I>(spatial);
    const I nc = channels_last ? i / (s * cc) * cc + i % cc : i / s;
    y[i] = from_float<T>(to_float(x[i]) * to_float(scale[nc]));
  });
}

template <typename T>
__global__ void broadcast_fill(const T* __restrict__ c, int64_t row_stride, int64_t col_stride, float beta, T* y,
                               int64_t total, int64_t cols) {
  grid_stride(total, [&](auto i) {
    using I = decltype(i);
    const I row = i / static_cast<I>(cols), col = i % static_cast<I>(cols);
    y[i] = from_float<T>(beta * to_float(c[row * row_stride + col * col_stride]));
  });
}

void require_float(edgert_dtype dtype, const char* what) {
  if (!is_float(dtype))
    fail(EDGERT_ERR_UNSUPPORTED, "%s: dtype %s, expected float32 or float16", what, edgert_dtype_name(dtype));
}

}  // namespace

void launch_bias_activation(void* y, const void* bias, const void* residual, edgert_dtype dtype, int64_t n, int64_t c,
                            int64_t spatial, bool channels_last, const Activation& act, cudaStream_t stream) {
  require_float(dtype, "bias_activation");
  const int64_t total = n * c * spatial;
  if (total == 0) return;
  if (dtype == EDGERT_DTYPE_FLOAT16 && !bias && !residual && total % 8 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0) {
    activation_half_x8<<<blocks_for(total / 8, kThreads), kThreads, 0, stream>>>(static_cast<__half*>(y), total / 8, act);
    check_launch("activation_half_x8");
    return;
  }
  const unsigned blocks = blocks_for(total, kThreads);
  if (dtype == EDGERT_DTYPE_FLOAT16)
    bias_activation<__half><<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(y), static_cast<const __half*>(bias),
                                                            static_cast<const __half*>(residual), total, c, spatial,
                                                            channels_last, act);
  else
    bias_activation<float><<<blocks, kThreads, 0, stream>>>(static_cast<float*>(y), static_cast<const float*>(bias),
                                                           static_cast<const float*>(residual), total, c, spatial,
                                                           channels_last, act);
  check_launch("bias_activation");
}

void launch_broadcast_fill(const void* c, int64_t row_stride, int64_t col_stride, float beta, void* y, edgert_dtype dtype,
                           int64_t rows, int64_t cols, cudaStream_t stream) {
  require_float(dtype, "broadcast_fill");
  const int64_t total = rows * cols;
  if (total == 0) return;
  const unsigned blocks = blocks_for(total, kThreads);
  if (dtype == EDGERT_DTYPE_FLOAT16)
    broadcast_fill<__half><<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(c), row_stride, col_stride, beta,
                                                           static_cast<__half*>(y), total, cols);
  else
    broadcast_fill<float><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(c), row_stride, col_stride, beta,
                                                          static_cast<float*>(y), total, cols);
  check_launch("broadcast_fill");
}

void launch_channel_scale(const void* x, const void* scale, void* y, edgert_dtype dtype, int64_t n, int64_t c,
                          int64_t spatial, bool channels_last, cudaStream_t stream) {
  require_float(dtype, "channel_scale");
  const int64_t total = n * c * spatial;
  if (total == 0) return;
  const unsigned blocks = blocks_for(total, kThreads);
  if (dtype == EDGERT_DTYPE_FLOAT16)
    channel_scale<__half><<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(x),
                                                          static_cast<const __half*>(scale), static_cast<__half*>(y),
                                                          total, c, spatial, channels_last);
  else
    channel_scale<float><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(x), static_cast<const float*>(scale),
                                                         static_cast<float*>(y), total, c, spatial, channels_last);
  check_launch("channel_scale");
}

void register_elementwise_kernels(KernelRegistry& r) {
  r.add<BinaryOp>("Add", "cuda-add", binary_supports);
  r.add<BinaryOp>("Sub", "cuda-sub", binary_supports);
  r.add<BinaryOp>("Mul", "cuda-mul", binary_supports);
  r.add<BinaryOp>("Div", "cuda-div", binary_supports);
  r.add<BinaryOp>("Pow", "cuda-pow", binary_supports);
  r.add<BinaryOp>("PRelu", "cuda-prelu", binary_supports);
  static const char* const kUnary[][2] = {
      {"Relu", "cuda-relu"},         {"LeakyRelu", "cuda-leaky-relu"},   {"Sigmoid", "cuda-sigmoid"},
      {"Tanh", "cuda-tanh"},         {"HardSigmoid", "cuda-hard-sigmoid"}, {"HardSwish", "cuda-hard-swish"},
      {"Gelu", "cuda-gelu"},         {"Erf", "cuda-erf"},                 {"Exp", "cuda-exp"},
      {"Log", "cuda-log"},           {"Sqrt", "cuda-sqrt"},               {"Neg", "cuda-neg"},
      {"Abs", "cuda-abs"},           {"Reciprocal", "cuda-reciprocal"},   {"Softplus", "cuda-softplus"},
      {"Softsign", "cuda-softsign"}, {"Elu", "cuda-elu"},                 {"Selu", "cuda-selu"},
      {"Celu", "cuda-celu"},         {"Mish", "cuda-mish"},               {"ThresholdedRelu", "cuda-thresholded-relu"},
      {"Floor", "cuda-floor"},       {"Ceil", "cuda-ceil"},               {"Round", "cuda-round"},
      {"Sign", "cuda-sign"},         {"Sin", "cuda-sin"},                 {"Cos", "cuda-cos"}};
  for (const auto& [op, name] : kUnary) r.add<PointwiseOp>(op, name, float_input_supports);
  r.add<PointwiseOp>("Clip", "cuda-clip", clip_supports, nullptr, (1u << 1) | (1u << 2));
  r.add_in_domain<PointwiseOp>("edgert", "PointwiseChain", "cuda-pointwise-chain", chain_supports);
  r.add<CopyOp>("Identity", "cuda-identity", copy_supports);
  r.add<CopyOp>("Dropout", "cuda-dropout", copy_supports, nullptr, (1u << 1) | (1u << 2));
  r.add<CastOp>("Cast", "cuda-cast", cast_supports);
}

}  // namespace edgert::cuda

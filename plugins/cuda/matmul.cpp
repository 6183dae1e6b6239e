// Matrix products on the GPU through cuBLASLt: Gemm, MatMul and the builder's fused forms
// (edgert.FusedGemm: Gemm + residual + activation; edgert.FusedMatMul: MatMul + bias [N] +
// residual + activation). Bias and ReLU ride in cuBLASLt's epilogue, the residual (input 3, of
// the output's element count) as its C with beta 1; other activations in one kernel of ours
// after it.
// Tactics are the algorithms cuBLASLt's heuristic proposes for the shapes (lt_gemm.h), tactic
// i + 1 the i-th.
#include <algorithm>
#include <array>

#include "activation.cuh"
#include "cuda_op.h"
#include "epilogue.h"
#include "handles.h"
#include "lt_gemm.h"

namespace edgert::cuda {
namespace {

bool is_fused(const edgert_node& node) { return node.domain && std::string(node.domain) == "edgert"; }
bool is_gemm(const edgert_node& node) {
  const std::string op = node.op_type;
  return op == "Gemm" || op == "FusedGemm";
}

// Numpy matmul batching, for the forms cuBLASLt's strided batches take: equal batch dims, or
// one side without them. A batched A with a 2-D B folds the batch into M (one larger product).
GemmShape matmul_shape(const edgert_tensor& a, const edgert_tensor& b) {
  if (a.rank < 2 || b.rank < 2)
    fail(EDGERT_ERR_UNSUPPORTED, "MatMul of rank %d and %d operands (1-D ones stay on the CPU)", a.rank, b.rank);
  GemmShape s;
  s.m = a.dims[a.rank - 2];
  s.k = a.dims[a.rank - 1];
  s.n = b.dims[b.rank - 1];
  if (b.dims[b.rank - 2] != s.k)
    fail(EDGERT_ERR_SHAPE, "inner dims differ: A is %s, B is %s", shape_string(shape_of(a)).c_str(),
         shape_string(shape_of(b)).c_str());
  const Shape batch_a(a.dims, a.dims + a.rank - 2), batch_b(b.dims, b.dims + b.rank - 2);
  const int64_t count_a = numel(batch_a), count_b = numel(batch_b);
  s.out = batch_a.size() >= batch_b.size() ? batch_a : batch_b;
  if (b.rank == 2) {
    s.m *= count_a;
  } else if (a.rank == 2) {
    s.batch = count_b;
    s.stride_b = s.k * s.n;
  } else if (batch_a == batch_b) {
    s.batch = count_a;
    s.stride_a = s.m * s.k;
    s.stride_b = s.k * s.n;
  } else {
    fail(EDGERT_ERR_UNSUPPORTED, "MatMul batch dims %s and %s broadcast; only equal ones run on the GPU",
         shape_string(batch_a).c_str(), shape_string(batch_b).c_str());
  }
  s.out.push_back(a.dims[a.rank - 2]);
  s.out.push_back(s.n);
  return s;
}

GemmShape gemm_shape(const edgert_node& node, const edgert_tensor& a, const edgert_tensor& b) {
  if (a.rank != 2 || b.rank != 2) fail(EDGERT_ERR_SHAPE, "Gemm A and B must be 2-D, got ranks %d and %d", a.rank, b.rank);
  Attributes attrs(&node);
  GemmShape s;
  s.trans_a = attrs.get_int("transA", 0) != 0;
  s.trans_b = attrs.get_int("transB", 0) != 0;
  s.m = s.trans_a ? a.dims[1] : a.dims[0];
  s.k = s.trans_a ? a.dims[0] : a.dims[1];
  s.n = s.trans_b ? b.dims[0] : b.dims[1];
  if ((s.trans_b ? b.dims[1] : b.dims[0]) != s.k)
    fail(EDGERT_ERR_SHAPE, "inner dims differ: A' is [%lldx%lld], B is %s", static_cast<long long>(s.m),
         static_cast<long long>(s.k), shape_string(shape_of(b)).c_str());
  s.out = {s.m, s.n};
  return s;
}

// How C (Gemm) or the bias (FusedMatMul) enters: as cuBLASLt's bias epilogue (a vector of N),
// as its C matrix (a full [M, N] with beta), broadcast by a kernel of ours into the output
// that cuBLASLt then accumulates into (any other shape Gemm's unidirectional broadcast takes:
// a scalar, [1], [M, 1], [1, N] with beta), or not at all.
enum class Addend { None, BiasVector, Matrix, Broadcast };

struct ProductSetup {
  GemmShape shape;
  Addend addend = Addend::None;
  float alpha = 1, beta = 0;
  float c_beta = 1;                          // Broadcast: C's weight, applied by the fill
  int64_t c_row_stride = 0, c_col_stride = 0;  // Broadcast: C's strides over the [M, N] output
  Activation activation;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool separate_activation = false;  // an activation cuBLASLt's epilogue does not have
  bool residual = false;             // input 3 added as C
};

ProductSetup setup_of(const edgert_node& node, const edgert_tensor* in) {
  const edgert_tensor &a = in[0], &b = in[1];
  if (!is_float(a.dtype) || b.dtype != a.dtype)
    fail(EDGERT_ERR_UNSUPPORTED, "A is %s and B %s; GPU products take float32 or float16, both alike",
         edgert_dtype_name(a.dtype), edgert_dtype_name(b.dtype));
  ProductSetup p;
  Attributes attrs(&node);
  p.shape = is_gemm(node) ? gemm_shape(node, a, b) : matmul_shape(a, b);
  p.alpha = is_gemm(node) ? attrs.get_float("alpha", 1.0f) : 1.0f;
  const float beta = is_gemm(node) ? attrs.get_float("beta", 1.0f) : 1.0f;
  const bool has_addend = node.num_inputs > 2 && is_present(in[2]);
  if (has_addend) {
    const edgert_tensor& c = in[2];
    if (c.dtype != a.dtype) fail(EDGERT_ERR_SHAPE, "C has dtype %s, A has %s", edgert_dtype_name(c.dtype), edgert_dtype_name(a.dtype));
    const int64_t count = numel(c);
    const bool vector = count == p.shape.n && (c.rank == 1 || (c.rank == 2 && c.dims[0] == 1));
    if (vector && beta == 1.0f) {
      p.addend = Addend::BiasVector;
    } else if (is_gemm(node) && c.rank == 2 && c.dims[0] == p.shape.m && c.dims[1] == p.shape.n) {
      p.addend = Addend::Matrix;
      p.beta = beta;
    } else if (is_gemm(node) && c.rank <= 2) {
      // Unidirectional broadcast to [M, N]: C's dims align to the right and are 1 or the output's.
      const int64_t rows = c.rank == 2 ? c.dims[0] : 1, cols = c.rank >= 1 ? c.dims[c.rank - 1] : 1;
      if ((rows != 1 && rows != p.shape.m) || (cols != 1 && cols != p.shape.n))
        fail(EDGERT_ERR_SHAPE, "C of shape %s does not broadcast to [%lldx%lld]", shape_string(shape_of(c)).c_str(),
             static_cast<long long>(p.shape.m), static_cast<long long>(p.shape.n));
      p.addend = Addend::Broadcast;
      p.beta = 1.0f;  // the product adds into the broadcast C the fill wrote
      p.c_beta = beta;
      p.c_row_stride = rows == 1 ? 0 : cols;
      p.c_col_stride = cols == 1 ? 0 : 1;
    } else {
      fail(EDGERT_ERR_UNSUPPORTED, "C of shape %s (beta %g) broadcasts in a way the GPU product does not take",
           shape_string(shape_of(c)).c_str(), static_cast<double>(beta));
    }
  }
  if (is_fused(node) && node.num_inputs > 3 && is_present(in[3])) {
    const edgert_tensor& r = in[3];
    if (p.addend != Addend::None && p.addend != Addend::BiasVector)
      fail(EDGERT_ERR_UNSUPPORTED, "a residual beside C of shape %s: the GPU product takes it with a bias vector only",
           shape_string(shape_of(in[2])).c_str());
    if (r.dtype != a.dtype || numel(r) != numel(p.shape.out))
      fail(EDGERT_ERR_SHAPE, "residual %s %s: expected %s with the output's element count", edgert_dtype_name(r.dtype),
           shape_string(shape_of(r)).c_str(), edgert_dtype_name(a.dtype));
    p.residual = true;
    p.beta = 1.0f;
  }
  p.activation = is_fused(node) ? Activation::from_node(node) : Activation{};
  const bool bias = p.addend == Addend::BiasVector;
  if (p.activation.kind == ActivationKind::Relu) p.epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  else p.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  p.separate_activation = p.activation.kind != ActivationKind::None && p.activation.kind != ActivationKind::Relu;
  return p;
}

int32_t supports_product(const edgert_node* node, const edgert_tensor* in) {
  // cuBLASLt reads row-major matrices: a rank-4 operand stored channels-last (a transformer's
  // [B, H, W, C] activations beside convolutions) would be read as if its bytes were [B, H, W, C]
  // row-major; such nodes stay row-major and the layout pass reformats around them.
  if (channels_last(*node)) return 0;
  for (int i = 0; i < 2; ++i)
    if (in[i].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[i].dtype)) return 0;
  if (!is_gemm(*node) && ((in[0].rank >= 0 && in[0].rank < 2) || (in[1].rank >= 0 && in[1].rank < 2))) return 0;
  if (is_fused(*node)) {
    try {
      Activation::from_node(*node);
    } catch (const KernelError&) {
      return 0;
    }
  }
  return 1;
}

std::vector<TacticSpec> product_tactics(const edgert_node* node, const edgert_tensor* in) {
  for (int i = 0; i < 2; ++i)
    if (in[i].rank < 0 || !is_float(in[i].dtype)) return {};
  for (int i = 0; i < 2; ++i)
    for (int32_t d = 0; d < in[i].rank; ++d)
      if (in[i].dims[d] < 0) return {};
  ProductSetup p = setup_of(*node, in);
  LtPlan plan;
  plan.build(p.shape, in[0].dtype, p.epilogue, allows_tf32(*node));
  std::vector<TacticSpec> tactics;
  for (int i = 0; i < plan.algorithms(); ++i) tactics.push_back({i + 1, kLtGemmTacticNames[i]});
  return tactics;
}

class ProductOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    p_ = setup_of(node, in);
    dtype_ = in[0].dtype;
    set_output(out[0], dtype_, p_.shape.out);
    plan_.build(p_.shape, dtype_, p_.epilogue, allows_tf32(node));
    index_ = static_cast<int>(std::max<int64_t>(tactic(), 1) - 1);
    if (index_ >= plan_.algorithms())
      fail(EDGERT_ERR_UNSUPPORTED, "tactic %lld: cuBLASLt proposes only %d algorithms for this product",
           static_cast<long long>(tactic()), plan_.algorithms());
    info.workspace_bytes = kLtWorkspaceBytes;
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace,
               cudaStream_t stream) override {
    const void* bias = p_.addend == Addend::BiasVector ? in[2].data : nullptr;
    const void* c = p_.addend == Addend::Matrix ? in[2].data : p_.residual ? in[3].data : nullptr;
    if (p_.addend == Addend::Broadcast) {
      launch_broadcast_fill(in[2].data, p_.c_row_stride, p_.c_col_stride, p_.c_beta, out[0].data, dtype_, p_.shape.m,
                            p_.shape.n, stream);
      c = out[0].data;
    }
    plan_.run(index_, p_.alpha, in[0].data, in[1].data, p_.beta, c, out[0].data, bias, workspace, stream);
    if (p_.separate_activation)
      launch_bias_activation(out[0].data, nullptr, nullptr, dtype_, numel(out[0]) / p_.shape.n, p_.shape.n, 1, true,
                             p_.activation, stream);
  }

 private:
  ProductSetup p_;
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  LtPlan plan_;
  int index_ = 0;
};

}  // namespace

void register_matmul_kernels(KernelRegistry& r) {
  r.add<ProductOp>("Gemm", "cuda-gemm", supports_product, product_tactics);
  r.add<ProductOp>("MatMul", "cuda-matmul", supports_product, product_tactics);
  r.add_in_domain<ProductOp>("edgert", "FusedGemm", "cuda-fused-gemm", supports_product, product_tactics);
  r.add_in_domain<ProductOp>("edgert", "FusedMatMul", "cuda-fused-matmul", supports_product, product_tactics);
}

}  // namespace edgert::cuda

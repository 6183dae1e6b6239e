// Matrix products on the GPU through cuBLASLt: Gemm, MatMul and the builder's fused forms
// (edgert.FusedGemm: Gemm + activation; edgert.FusedMatMul: MatMul + bias [N] + activation).
// Bias and ReLU ride in cuBLASLt's epilogue; other activations in one kernel of ours after it.
// Tactics are the algorithms cuBLASLt's heuristic proposes for the shapes, in its order (a
// tactic is the index in that list plus one; the timing cache keys records on the cuBLASLt
// version, so the index names the same algorithm wherever the record is used).
//
// cuBLASLt is column-major: the row-major Y[M,N] = A'[M,K] B'[K,N] is computed as the
// column-major Y^T[N,M] = B'^T A'^T, so B's buffer is cuBLASLt's A and A's is its B.
#include <algorithm>
#include <array>

#include "activation.cuh"
#include "cuda_op.h"
#include "epilogue.h"
#include "handles.h"

namespace edgert::cuda {
namespace {

constexpr int kMaxAlgorithms = 8;
constexpr size_t kWorkspaceBytes = size_t{4} << 20;
const char* const kTacticNames[kMaxAlgorithms] = {"gemm-cublaslt-heuristic-0", "gemm-cublaslt-heuristic-1",
                                                  "gemm-cublaslt-heuristic-2", "gemm-cublaslt-heuristic-3",
                                                  "gemm-cublaslt-heuristic-4", "gemm-cublaslt-heuristic-5",
                                                  "gemm-cublaslt-heuristic-6", "gemm-cublaslt-heuristic-7"};

bool is_fused(const edgert_node& node) { return node.domain && std::string(node.domain) == "edgert"; }
bool is_gemm(const edgert_node& node) {
  const std::string op = node.op_type;
  return op == "Gemm" || op == "FusedGemm";
}

cudaDataType_t cuda_type(edgert_dtype dtype) { return dtype == EDGERT_DTYPE_FLOAT16 ? CUDA_R_16F : CUDA_R_32F; }

// One product's shapes, as row-major operands.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0;  // elements between batches (0: broadcast)
  bool trans_a = false, trans_b = false;
  Shape out;
};

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
// as its C matrix (a full [M, N] with beta), or not at all.
enum class Addend { None, BiasVector, Matrix };

// The descriptors of one product; cuBLASLt keeps no state between calls.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  std::array<cublasLtMatmulHeuristicResult_t, kMaxAlgorithms> algorithms{};
  int found = 0;

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() { reset(); }
  void reset() {
    if (op) cublasLtMatmulDescDestroy(op);
    for (cublasLtMatrixLayout_t* l : {&a, &b, &c, &d})
      if (*l) cublasLtMatrixLayoutDestroy(*l);
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    op = nullptr;
    a = b = c = d = nullptr;
    preference = nullptr;
    found = 0;
  }

  void build(const GemmShape& s, edgert_dtype dtype, Addend addend, cublasLtEpilogue_t epilogue, bool tf32) {
    reset();
    const cudaDataType_t type = cuda_type(dtype);
    const cublasComputeType_t compute =
        dtype == EDGERT_DTYPE_FLOAT32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    check_cublas(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    // cuBLASLt's A is our B: transposed exactly when our B is.
    const cublasOperation_t op_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a), "TRANSA");
    check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b), "TRANSB");
    check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
                 "EPILOGUE");
    auto layout = [&](cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t stride) {
      check_cublas(cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rows),
                   "cublasLtMatrixLayoutCreate");
      if (s.batch > 1) {
        const int32_t count = static_cast<int32_t>(s.batch);
        check_cublas(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                     "BATCH_COUNT");
        check_cublas(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                      sizeof stride),
                     "STRIDED_BATCH_OFFSET");
      }
    };
    // Column-major views of the row-major buffers (leading dimension = rows of the view).
    layout(&a, s.trans_b ? s.k : s.n, s.trans_b ? s.n : s.k, s.stride_b);
    layout(&b, s.trans_a ? s.m : s.k, s.trans_a ? s.k : s.m, s.stride_a);
    layout(&c, s.n, s.m, s.m * s.n);
    layout(&d, s.n, s.m, s.m * s.n);
    (void)addend;
    check_cublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const uint64_t workspace = kWorkspaceBytes;
    check_cublas(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                      sizeof workspace),
                 "MAX_WORKSPACE_BYTES");
    check_cublas(cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), op, a, b, c, d, preference, kMaxAlgorithms,
                                                algorithms.data(), &found),
                 "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) fail(EDGERT_ERR_UNSUPPORTED, "cuBLASLt proposes no algorithm for this product");
  }
};

struct ProductSetup {
  GemmShape shape;
  Addend addend = Addend::None;
  float alpha = 1, beta = 0;
  Activation activation;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool separate_activation = false;  // an activation cuBLASLt's epilogue does not have
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
    } else {
      fail(EDGERT_ERR_UNSUPPORTED, "C of shape %s (beta %g) broadcasts in a way the GPU product does not take",
           shape_string(shape_of(c)).c_str(), static_cast<double>(beta));
    }
  }
  p.activation = is_fused(node) ? Activation::from_node(node) : Activation{};
  const bool bias = p.addend == Addend::BiasVector;
  if (p.activation.kind == ActivationKind::Relu) p.epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  else p.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  p.separate_activation = p.activation.kind != ActivationKind::None && p.activation.kind != ActivationKind::Relu;
  return p;
}

int32_t supports_product(const edgert_node* node, const edgert_tensor* in) {
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
  plan.build(p.shape, in[0].dtype, p.addend, p.epilogue, allows_tf32(*node));
  std::vector<TacticSpec> tactics;
  for (int i = 0; i < plan.found; ++i) tactics.push_back({i + 1, kTacticNames[i]});
  return tactics;
}

class ProductOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    p_ = setup_of(node, in);
    dtype_ = in[0].dtype;
    set_output(out[0], dtype_, p_.shape.out);
    plan_.build(p_.shape, dtype_, p_.addend, p_.epilogue, allows_tf32(node));
    const int64_t index = std::max<int64_t>(tactic(), 1) - 1;
    if (index >= plan_.found)
      fail(EDGERT_ERR_UNSUPPORTED, "tactic %lld: cuBLASLt proposes only %d algorithms for this product",
           static_cast<long long>(tactic()), plan_.found);
    algorithm_ = plan_.algorithms[static_cast<size_t>(index)].algo;
    info.workspace_bytes = kWorkspaceBytes;
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace,
               cudaStream_t stream) override {
    if (p_.addend == Addend::BiasVector) {
      const void* bias = in[2].data;
      check_cublas(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                   "BIAS_POINTER");
    }
    const void* c = p_.addend == Addend::Matrix ? in[2].data : out[0].data;
    check_cublas(cublasLtMatmul(cublaslt_handle(), plan_.op, &p_.alpha, in[1].data, plan_.a, in[0].data, plan_.b,
                                &p_.beta, c, plan_.c, out[0].data, plan_.d, &algorithm_, workspace, kWorkspaceBytes,
                                stream),
                 "cublasLtMatmul");
    if (p_.separate_activation)
      launch_bias_activation(out[0].data, nullptr, nullptr, dtype_, numel(out[0]) / p_.shape.n, p_.shape.n, 1, true,
                             p_.activation, stream);
  }

 private:
  ProductSetup p_;
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  LtPlan plan_;
  cublasLtMatmulAlgo_t algorithm_{};
};

}  // namespace

void register_matmul_kernels(KernelRegistry& r) {
  r.add<ProductOp>("Gemm", "cuda-gemm", supports_product, product_tactics);
  r.add<ProductOp>("MatMul", "cuda-matmul", supports_product, product_tactics);
  r.add_in_domain<ProductOp>("edgert", "FusedGemm", "cuda-fused-gemm", supports_product, product_tactics);
  r.add_in_domain<ProductOp>("edgert", "FusedMatMul", "cuda-fused-matmul", supports_product, product_tactics);
}

}  // namespace edgert::cuda

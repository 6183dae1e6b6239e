// Element-wise unary math and activations.
#include <cmath>

#include "kernel.h"

namespace edgert::cpu {
namespace {

// Applies `f` (on compute_t<T>) to every element; the dtype must be in `allowed`.
template <typename F>
class UnaryOp : public Op {
 public:
  explicit UnaryOp(unsigned allowed = kFloats) : allowed_(allowed) {}
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    dispatch(in[0].dtype, allowed_, [](auto) {}, "input");
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(in[0].dtype, allowed_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      int64_t n = numel(in[0]);
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(F::template apply<C>(static_cast<C>(x[i])));
    });
  }

 private:
  unsigned allowed_;
};

struct Relu {
  template <typename C> static C apply(C x) { return x > C(0) ? x : C(0); }
};
struct Neg {
  template <typename C> static C apply(C x) { return static_cast<C>(-x); }
};
struct Abs {
  template <typename C> static C apply(C x) {
    if constexpr (std::is_unsigned_v<C>) return x;
    else return x < C(0) ? static_cast<C>(-x) : x;
  }
};

class ReluOp : public UnaryOp<Relu> {
 public:
  ReluOp() : UnaryOp<Relu>(kFloats | kSigned) {}
};
class NegOp : public UnaryOp<Neg> {
 public:
  NegOp() : UnaryOp<Neg>(kFloats | kSigned) {}
};
class AbsOp : public UnaryOp<Abs> {
 public:
  AbsOp() : UnaryOp<Abs>(kNumeric) {}
};

}  // namespace

void register_elementwise_unary_kernels(KernelRegistry& r) {
  r.add<ReluOp>("Relu", "ref-relu");
  r.add<NegOp>("Neg", "ref-neg");
  r.add<AbsOp>("Abs", "ref-abs");
}

}  // namespace edgert::cpu

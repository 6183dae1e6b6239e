// Broadcasting binary and variadic element-wise ops: arithmetic, comparison, logic, Where.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "broadcast.h"
#include "fast/binary_rows.h"
#include "kernel.h"

namespace edgert::cpu {
namespace {


enum class BinaryKind { Add, Sub, Mul, Div, Mod, FMod, Equal, Less, LessOrEqual, Greater,
                        GreaterOrEqual, And, Or, Xor, BitShiftLeft, BitShiftRight, BitwiseAnd,
                        BitwiseOr, BitwiseXor, PRelu };

template <typename T>
T python_mod(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    T r = a % b;
    if constexpr (std::is_signed_v<T>)
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    return a - std::floor(a / b) * b;  // unused for floats: ONNX requires fmod=1 there
  }
}

// Signed overflow is undefined in C++ (and narrow unsigned types promote to int, so they can
// overflow too); numpy and ONNX Runtime wrap around. Integer +, -, * therefore run in the
// unsigned version of the promoted type and are truncated back to T.
template <typename C, bool = std::is_integral_v<C> && !std::is_same_v<C, bool>>
struct wrap { using type = C; };
template <typename C>
struct wrap<C, true> { using type = std::make_unsigned_t<decltype(C() + 0)>; };
template <typename C>
using wrap_t = typename wrap<C>::type;

template <BinaryKind K, typename T>
auto apply(T a, T b) {
  using C = compute_t<T>;
  using W = wrap_t<C>;
  C x = static_cast<C>(a), y = static_cast<C>(b);
  if constexpr (K == BinaryKind::Add) return static_cast<T>(static_cast<C>(static_cast<W>(x) + static_cast<W>(y)));
  else if constexpr (K == BinaryKind::Sub) return static_cast<T>(static_cast<C>(static_cast<W>(x) - static_cast<W>(y)));
  else if constexpr (K == BinaryKind::Mul) return static_cast<T>(static_cast<C>(static_cast<W>(x) * static_cast<W>(y)));
  else if constexpr (K == BinaryKind::Div) {
    // Integer division by zero is undefined in ONNX; 0 keeps the reference kernel from trapping.
    if constexpr (std::is_integral_v<C>) return static_cast<T>(y == 0 ? 0 : x / y);
    else return static_cast<T>(x / y);
  } else if constexpr (K == BinaryKind::Mod) return static_cast<T>(python_mod<C>(x, y));
  else if constexpr (K == BinaryKind::FMod) {
    if constexpr (std::is_integral_v<C>) return static_cast<T>(y == 0 ? 0 : x % y);
    else return static_cast<T>(std::fmod(x, y));
  } else if constexpr (K == BinaryKind::Equal) return static_cast<bool>(x == y);
  else if constexpr (K == BinaryKind::Less) return static_cast<bool>(x < y);
  else if constexpr (K == BinaryKind::LessOrEqual) return static_cast<bool>(x <= y);
  else if constexpr (K == BinaryKind::Greater) return static_cast<bool>(x > y);
  else if constexpr (K == BinaryKind::GreaterOrEqual) return static_cast<bool>(x >= y);
  else if constexpr (K == BinaryKind::And) return static_cast<bool>(x && y);
  else if constexpr (K == BinaryKind::Or) return static_cast<bool>(x || y);
  else if constexpr (K == BinaryKind::Xor) return static_cast<bool>(static_cast<bool>(x) != static_cast<bool>(y));
  else if constexpr (K == BinaryKind::PRelu) return static_cast<T>(x < C(0) ? x * y : x);
  else if constexpr (std::is_integral_v<C>) {
    if constexpr (K == BinaryKind::BitShiftLeft) return static_cast<T>(y >= C(sizeof(C) * 8) ? 0 : x << y);
    else if constexpr (K == BinaryKind::BitShiftRight) return static_cast<T>(y >= C(sizeof(C) * 8) ? 0 : x >> y);
    else if constexpr (K == BinaryKind::BitwiseAnd) return static_cast<T>(x & y);
    else if constexpr (K == BinaryKind::BitwiseOr) return static_cast<T>(x | y);
    else return static_cast<T>(x ^ y);
  } else {
    return T{};  // bit ops on floats are refused in prepare
  }
}

constexpr bool is_comparison(BinaryKind k) {
  return k == BinaryKind::Equal || k == BinaryKind::Less || k == BinaryKind::LessOrEqual ||
         k == BinaryKind::Greater || k == BinaryKind::GreaterOrEqual || k == BinaryKind::And ||
         k == BinaryKind::Or || k == BinaryKind::Xor;
}

constexpr unsigned allowed_dtypes(BinaryKind k) {
  switch (k) {
    case BinaryKind::And: case BinaryKind::Or: case BinaryKind::Xor: return kBool;
    case BinaryKind::BitShiftLeft: case BinaryKind::BitShiftRight: return kUnsigned;
    case BinaryKind::BitwiseAnd: case BinaryKind::BitwiseOr: case BinaryKind::BitwiseXor:
      return kSigned | kUnsigned | kBool;
    case BinaryKind::Equal: return kAll;
    default: return kNumeric;
  }
}

template <BinaryKind K>
class BinaryOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    if (in[0].dtype != in[1].dtype)
      fail(EDGERT_ERR_SHAPE, "inputs have different dtypes (%s and %s)", dtype_name(in[0].dtype),
           dtype_name(in[1].dtype));
    kind_ = K;
    if constexpr (K == BinaryKind::Mod) {
      if (Attributes(&node).get_int("fmod", 0) == 1) kind_ = BinaryKind::FMod;
      else if (in[0].dtype == EDGERT_DTYPE_FLOAT32 || in[0].dtype == EDGERT_DTYPE_FLOAT64 ||
               in[0].dtype == EDGERT_DTYPE_FLOAT16 || in[0].dtype == EDGERT_DTYPE_BFLOAT16)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "Mod on floating point inputs requires fmod=1");
    }
    if constexpr (K == BinaryKind::BitShiftLeft) {
      std::string direction = Attributes(&node).get_string("direction", "");
      if (direction == "RIGHT") kind_ = BinaryKind::BitShiftRight;
      else if (direction != "LEFT") fail(EDGERT_ERR_INVALID_ARGUMENT, "direction must be LEFT or RIGHT, got '%s'", direction.c_str());
    }
    dispatch(in[0].dtype, allowed_dtypes(K), [](auto) {}, "input");
    Shape shape = broadcast_shapes({shape_of(in[0]), shape_of(in[1])});
    set_output(out[0], is_comparison(K) ? EDGERT_DTYPE_BOOL : in[0].dtype, shape);
    fast_ = false;
    if constexpr (K == BinaryKind::Add || K == BinaryKind::Sub || K == BinaryKind::Mul || K == BinaryKind::Div) {
      constexpr ArithmeticKind kind = K == BinaryKind::Add   ? ArithmeticKind::Add
                                      : K == BinaryKind::Sub ? ArithmeticKind::Sub
                                      : K == BinaryKind::Mul ? ArithmeticKind::Mul
                                                             : ArithmeticKind::Div;
      fast_ = tactic() == kBinaryRowsTactic && fast_binary_.prepare(kind, in[0], in[1], shape);
    }
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (fast_) return fast_binary_.execute(data_as<float>(in[0]), data_as<float>(in[1]), data_as<float>(out[0]));
    // Only Mod and BitShift have a second variant; instantiate it only there.
    if constexpr (K == BinaryKind::Mod) {
      if (kind_ == BinaryKind::FMod) return run<BinaryKind::FMod>(in, out);
    } else if constexpr (K == BinaryKind::BitShiftLeft) {
      if (kind_ == BinaryKind::BitShiftRight) return run<BinaryKind::BitShiftRight>(in, out);
    }
    run<K>(in, out);
  }

 private:
  template <BinaryKind R>
  void run(const edgert_tensor* in, edgert_tensor* out) {
    dispatch_only<allowed_dtypes(K)>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using R_t = decltype(apply<R, T>(T{}, T{}));
      const T* a = data_as<T>(in[0]);
      const T* b = data_as<T>(in[1]);
      R_t* c = data_as<R_t>(out[0]);
      Shape sa = shape_of(in[0]), sb = shape_of(in[1]), sc = shape_of(out[0]);
      int64_t n = numel(sc);
      if (sa == sc && sb == sc) {
        for (int64_t i = 0; i < n; ++i) c[i] = apply<R, T>(a[i], b[i]);
      } else if (numel(sb) == 1 && sa == sc) {
        for (int64_t i = 0; i < n; ++i) c[i] = apply<R, T>(a[i], b[0]);
      } else {
        for (BroadcastIterator it(sc, {sa, sb}); !it.done(); it.next())
          c[it.index()] = apply<R, T>(a[it.offset(0)], b[it.offset(1)]);
      }
    });
  }

  BinaryKind kind_ = K;
  bool fast_ = false;
  FastBinary fast_binary_;
};

// Pow is the one binary op whose inputs may differ in dtype (opset 12+): the output has the
// base's dtype, and the exponent may be any numeric type. The exponent is converted to double
// once into the workspace so only the base type needs a typed loop.
class PowOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    dispatch(in[0].dtype, kFloats | kSigned, [](auto) {}, "base X");
    dispatch(in[1].dtype, kNumeric, [](auto) {}, "exponent Y");
    set_output(out[0], in[0].dtype, broadcast_shapes({shape_of(in[0]), shape_of(in[1])}));
    info.workspace_bytes = static_cast<size_t>(numel(in[1])) * sizeof(double);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    double* exponent = static_cast<double*>(workspace);
    int64_t ne = numel(in[1]);
    dispatch_only<kNumeric>(in[1].dtype, [&](auto tag) {
      using E = typename decltype(tag)::type;
      const E* y = data_as<E>(in[1]);
      for (int64_t i = 0; i < ne; ++i) exponent[i] = static_cast<double>(static_cast<compute_t<E>>(y[i]));
    });
    dispatch_only<kFloats | kSigned>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      T* z = data_as<T>(out[0]);
      auto pow1 = [](T base, double e) {
        double r = std::pow(static_cast<double>(static_cast<C>(base)), e);
        if constexpr (std::is_integral_v<C>) {
          // Like a C cast, but without the undefined behaviour on NaN or overflow.
          if (std::isnan(r)) return T(0);
          if (r >= static_cast<double>(std::numeric_limits<C>::max())) return std::numeric_limits<T>::max();
          if (r <= static_cast<double>(std::numeric_limits<C>::lowest())) return std::numeric_limits<T>::lowest();
        }
        return static_cast<T>(static_cast<C>(r));
      };
      for (BroadcastIterator it(shape_of(out[0]), {shape_of(in[0]), shape_of(in[1])}); !it.done(); it.next())
        z[it.index()] = pow1(x[it.offset(0)], exponent[it.offset(1)]);
    });
  }
};

enum class VariadicKind { Sum, Mean, Max, Min };

template <VariadicKind K>
class VariadicOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    std::vector<Shape> shapes;
    for (int32_t i = 0; i < node.num_inputs; ++i) {
      if (in[i].dtype != in[0].dtype)
        fail(EDGERT_ERR_SHAPE, "input %d has dtype %s, input 0 has %s", i, dtype_name(in[i].dtype),
             dtype_name(in[0].dtype));
      shapes.push_back(shape_of(in[i]));
    }
    if (shapes.empty()) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs at least one input");
    dispatch(in[0].dtype, K == VariadicKind::Sum || K == VariadicKind::Mean ? kFloats : kNumeric, [](auto) {}, "input");
    set_output(out[0], in[0].dtype, broadcast_shapes(shapes));
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    constexpr unsigned kAllowed = K == VariadicKind::Sum || K == VariadicKind::Mean ? kFloats : kNumeric;
    dispatch_only<kAllowed>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      Shape so = shape_of(out[0]);
      std::vector<Shape> shapes;
      for (int32_t i = 0; i < node.num_inputs; ++i) shapes.push_back(shape_of(in[i]));
      T* o = data_as<T>(out[0]);
      for (BroadcastIterator it(so, shapes); !it.done(); it.next()) {
        C acc = static_cast<C>(data_as<T>(in[0])[it.offset(0)]);
        bool nan = false;
        for (int32_t i = 1; i < node.num_inputs; ++i) {
          C v = static_cast<C>(data_as<T>(in[i])[it.offset(i)]);
          if constexpr (is_float_like_v<T>) nan = nan || std::isnan(static_cast<double>(v)) || std::isnan(static_cast<double>(acc));
          if constexpr (K == VariadicKind::Sum || K == VariadicKind::Mean) acc += v;
          else if constexpr (K == VariadicKind::Max) acc = v > acc ? v : acc;
          else acc = v < acc ? v : acc;
        }
        if constexpr (K == VariadicKind::Mean) acc = acc / static_cast<C>(node.num_inputs);
        if constexpr (is_float_like_v<T> && (K == VariadicKind::Max || K == VariadicKind::Min))
          if (nan) acc = static_cast<C>(NAN);
        o[it.index()] = static_cast<T>(acc);
      }
    });
  }
};

class WhereOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    if (in[0].dtype != EDGERT_DTYPE_BOOL) fail(EDGERT_ERR_SHAPE, "condition must be bool, got %s", dtype_name(in[0].dtype));
    if (in[1].dtype != in[2].dtype)
      fail(EDGERT_ERR_SHAPE, "X and Y have different dtypes (%s and %s)", dtype_name(in[1].dtype), dtype_name(in[2].dtype));
    if (dtype_size(in[1].dtype) == 0) throw_unsupported_dtype(in[1].dtype, "X");
    set_output(out[0], in[1].dtype, broadcast_shapes({shape_of(in[0]), shape_of(in[1]), shape_of(in[2])}));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    size_t size = dtype_size(out[0].dtype);
    const bool* cond = data_as<bool>(in[0]);
    const char* x = static_cast<const char*>(in[1].data);
    const char* y = static_cast<const char*>(in[2].data);
    char* o = static_cast<char*>(out[0].data);
    for (BroadcastIterator it(shape_of(out[0]), {shape_of(in[0]), shape_of(in[1]), shape_of(in[2])}); !it.done(); it.next()) {
      const char* src = cond[it.offset(0)] ? x + it.offset(1) * size : y + it.offset(2) * size;
      std::memcpy(o + it.index() * size, src, size);
    }
  }
};

}  // namespace

void register_elementwise_binary_kernels(KernelRegistry& r) {
  r.add<BinaryOp<BinaryKind::Add>>("Add", "ref-add", nullptr, binary_tactics);
  r.add<BinaryOp<BinaryKind::Sub>>("Sub", "ref-sub", nullptr, binary_tactics);
  r.add<BinaryOp<BinaryKind::Mul>>("Mul", "ref-mul", nullptr, binary_tactics);
  r.add<BinaryOp<BinaryKind::Div>>("Div", "ref-div", nullptr, binary_tactics);
  r.add<PowOp>("Pow", "ref-pow");
  r.add<BinaryOp<BinaryKind::Mod>>("Mod", "ref-mod");
  r.add<BinaryOp<BinaryKind::Equal>>("Equal", "ref-equal");
  r.add<BinaryOp<BinaryKind::Less>>("Less", "ref-less");
  r.add<BinaryOp<BinaryKind::LessOrEqual>>("LessOrEqual", "ref-less-or-equal");
  r.add<BinaryOp<BinaryKind::Greater>>("Greater", "ref-greater");
  r.add<BinaryOp<BinaryKind::GreaterOrEqual>>("GreaterOrEqual", "ref-greater-or-equal");
  r.add<BinaryOp<BinaryKind::And>>("And", "ref-and");
  r.add<BinaryOp<BinaryKind::Or>>("Or", "ref-or");
  r.add<BinaryOp<BinaryKind::Xor>>("Xor", "ref-xor");
  r.add<BinaryOp<BinaryKind::BitShiftLeft>>("BitShift", "ref-bitshift");
  r.add<BinaryOp<BinaryKind::BitwiseAnd>>("BitwiseAnd", "ref-bitwise-and");
  r.add<BinaryOp<BinaryKind::BitwiseOr>>("BitwiseOr", "ref-bitwise-or");
  r.add<BinaryOp<BinaryKind::BitwiseXor>>("BitwiseXor", "ref-bitwise-xor");
  r.add<BinaryOp<BinaryKind::PRelu>>("PRelu", "ref-prelu");
  r.add<VariadicOp<VariadicKind::Sum>>("Sum", "ref-sum");
  r.add<VariadicOp<VariadicKind::Mean>>("Mean", "ref-mean");
  r.add<VariadicOp<VariadicKind::Max>>("Max", "ref-max");
  r.add<VariadicOp<VariadicKind::Min>>("Min", "ref-min");
  r.add<WhereOp>("Where", "ref-where");
}

}  // namespace edgert::cpu

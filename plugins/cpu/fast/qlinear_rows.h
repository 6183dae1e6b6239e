// Row kernels of the INT8 elementwise ops, each bit-exact with its reference's formula
// (quantize.cpp, qlinear_contrib.cpp): u8 only, per-tensor scales and zero points. One family per
// instruction set (x86/qlinear_rows_avx512.cpp, x86/qlinear_rows_avx2.cpp,
// arm/qlinear_rows_neon.cpp); the ops take a family's table in prepare (row_kernels) and call
// through it, so they name no instruction set themselves.
#pragma once

#include <cstdint>
#include <vector>

#include "kernel.h"

namespace edgert::cpu::qrows {

// y[i] = saturate_round(x[i] / scale, zero_point): the division kept (x * (1 / scale) can round
// differently).
using QuantizeU8 = void (*)(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y);
// y[i] = float(x[i] - zero_point) * scale.
using DequantizeU8 = void (*)(const uint8_t* x, int64_t n, int32_t zero_point, float scale, float* y);
// c[i] = saturate_round(float(a[i] - za) * ra + float(b[j] - zb) * rb, zc), with j = i
// (b_step 1) or j = 0 (b_step 0: one b value for the whole run). Two rounded products, then
// their sum: never one fused multiply-add.
using QLinearAddU8 = void (*)(const uint8_t* a, int32_t za, float ra, const uint8_t* b, int64_t b_step, int32_t zb,
                              float rb, int64_t n, int32_t zc, uint8_t* c);
// c[i] = saturate_round(float((a[i] - za) * (b[j] - zb)) * r, zc), j as for the add.
using QLinearMulU8 = void (*)(const uint8_t* a, int32_t za, const uint8_t* b, int64_t b_step, int32_t zb, float r,
                              int64_t n, int32_t zc, uint8_t* c);
// sums[p] = the sum of the `size` bytes of plane p (exact: at most 255 x size).
using PlaneSumsU8 = void (*)(const uint8_t* x, int64_t planes, int64_t size, int64_t* sums);

// One family's kernels, each computing the formula above its type.
struct RowKernels {
  QuantizeU8 quantize;
  DequantizeU8 dequantize;
  QLinearAddU8 add;
  QLinearMulU8 mul;
  PlaneSumsU8 plane_sums;
};

// The families. A family's tactic id is the same for every row op (QuantizeLinear,
// DequantizeLinear, QLinearAdd, QLinearMul, QLinearGlobalAveragePool); stable: engines and
// timing caches store them.
enum class RowIsa : int64_t { Avx512 = 1, Avx2 = 2, Neon = 3 };
constexpr int64_t tactic_id(RowIsa isa) { return static_cast<int64_t>(isa); }

// The kernels of the family a tactic id names, or null when the id names none or this build or
// CPU lacks its instruction set (an engine tuned on another CPU: the reference runs). The tables
// are static: the pointer stays valid for the plugin's lifetime.
const RowKernels* row_kernels(int64_t tactic);

// A row op's tactic names, one per family. Each ends in its instruction set ("-avx512",
// "-avx2", "-neon"), which the builder matches against a board's CPU features.
struct RowTacticNames {
  const char *avx512, *avx2, *neon;
};
// The tactics of the families this CPU runs, fastest first (names must be string literals).
std::vector<TacticSpec> row_tactics(const RowTacticNames& names);

#if defined(__x86_64__)
// AVX-512 F, BW and VL: 16 elements a vector, masked tails.
void quantize_u8_avx512(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y);
void dequantize_u8_avx512(const uint8_t* x, int64_t n, int32_t zero_point, float scale, float* y);
void qlinear_add_u8_avx512(const uint8_t* a, int32_t za, float ra, const uint8_t* b, int64_t b_step, int32_t zb,
                           float rb, int64_t n, int32_t zc, uint8_t* c);
void qlinear_mul_u8_avx512(const uint8_t* a, int32_t za, const uint8_t* b, int64_t b_step, int32_t zb, float r,
                           int64_t n, int32_t zc, uint8_t* c);
void plane_sums_u8_avx512(const uint8_t* x, int64_t planes, int64_t size, int64_t* sums);

// AVX2 (x86-64-v3): 16 elements a step as two vectors of 8, tails through a copy on the stack.
void quantize_u8_avx2(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y);
void dequantize_u8_avx2(const uint8_t* x, int64_t n, int32_t zero_point, float scale, float* y);
void qlinear_add_u8_avx2(const uint8_t* a, int32_t za, float ra, const uint8_t* b, int64_t b_step, int32_t zb,
                         float rb, int64_t n, int32_t zc, uint8_t* c);
void qlinear_mul_u8_avx2(const uint8_t* a, int32_t za, const uint8_t* b, int64_t b_step, int32_t zb, float r,
                         int64_t n, int32_t zc, uint8_t* c);
void plane_sums_u8_avx2(const uint8_t* x, int64_t planes, int64_t size, int64_t* sums);
#endif

#if defined(__aarch64__)
// Advanced SIMD (every ARMv8-A): 16 elements a step as four vectors of 4, tails through a copy.
void quantize_u8_neon(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y);
void dequantize_u8_neon(const uint8_t* x, int64_t n, int32_t zero_point, float scale, float* y);
void qlinear_add_u8_neon(const uint8_t* a, int32_t za, float ra, const uint8_t* b, int64_t b_step, int32_t zb,
                         float rb, int64_t n, int32_t zc, uint8_t* c);
void qlinear_mul_u8_neon(const uint8_t* a, int32_t za, const uint8_t* b, int64_t b_step, int32_t zb, float r,
                         int64_t n, int32_t zc, uint8_t* c);
void plane_sums_u8_neon(const uint8_t* x, int64_t planes, int64_t size, int64_t* sums);
#endif

}  // namespace edgert::cpu::qrows

// AVX-512 row kernels of the INT8 elementwise ops (x86/qlinear_rows_avx512.cpp), each bit-exact
// with its reference's formula (quantize.cpp, qlinear_contrib.cpp): u8 only, per-tensor scales
// and zero points. The caller checks avx512_bw_available() (fast/avx512_bw.h) first.
#pragma once

#include <cstdint>

namespace edgert::cpu::qrows {

#if defined(__x86_64__)
// y[i] = saturate_round(x[i] / scale, zero_point): the division kept (x * (1 / scale) can round
// differently).
void quantize_u8_avx512(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y);
// y[i] = float(x[i] - zero_point) * scale.
void dequantize_u8_avx512(const uint8_t* x, int64_t n, int32_t zero_point, float scale, float* y);
// c[i] = saturate_round(float(a[i] - za) * ra + float(b[j] - zb) * rb, zc), with j = i
// (b_step 1) or j = 0 (b_step 0: one b value for the whole run).
void qlinear_add_u8_avx512(const uint8_t* a, int32_t za, float ra, const uint8_t* b, int64_t b_step, int32_t zb,
                           float rb, int64_t n, int32_t zc, uint8_t* c);
// c[i] = saturate_round(float((a[i] - za) * (b[j] - zb)) * r, zc), j as for the add.
void qlinear_mul_u8_avx512(const uint8_t* a, int32_t za, const uint8_t* b, int64_t b_step, int32_t zb, float r,
                           int64_t n, int32_t zc, uint8_t* c);
// sums[p] = the sum of the `size` bytes of plane p (exact: at most 255 x size).
void plane_sums_u8_avx512(const uint8_t* x, int64_t planes, int64_t size, int64_t* sums);
#endif

}  // namespace edgert::cpu::qrows

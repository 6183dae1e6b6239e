// The Advanced SIMD INT8 elementwise rows of fast/qlinear_rows.h, 16 elements a step (four
// vectors of 4 floats). A run's last partial step works on zero-padded copies on the stack, and
// only its first bytes are copied out. Every result goes through the same float operations as
// the scalar formula, in its order (the plugin compiles without FMA contraction, which GCC would
// otherwise do on aarch64), then the requantisation: clamp to whole-number bounds, round half to
// even with fcvtns (whatever FPCR's mode), add the zero point, narrow with saturation.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>

#include "fast/qlinear_rows.h"

namespace edgert::cpu::qrows {

namespace {

constexpr int64_t kStep = 16;

// 16 values as four vectors of 4, elements in order.
struct Int16x {
  int32x4_t v[4];
};
struct Float16x {
  float32x4_t v[4];
};

// The 16 bytes at p less the zero point, as int32 (exact).
Int16x minus_zero_point(const uint8_t* p, int16x8_t zero_point) {
  const uint8x16_t b = vld1q_u8(p);
  const int16x8_t lo = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(b))), zero_point);
  const int16x8_t hi = vsubq_s16(vreinterpretq_s16_u16(vmovl_high_u8(b)), zero_point);
  return {{vmovl_s16(vget_low_s16(lo)), vmovl_high_s16(lo), vmovl_s16(vget_low_s16(hi)), vmovl_high_s16(hi)}};
}

Float16x to_float(const Int16x& q) {
  return {{vcvtq_f32_s32(q.v[0]), vcvtq_f32_s32(q.v[1]), vcvtq_f32_s32(q.v[2]), vcvtq_f32_s32(q.v[3])}};
}

Float16x times(const Float16x& f, float32x4_t s) {
  return {{vmulq_f32(f.v[0], s), vmulq_f32(f.v[1], s), vmulq_f32(f.v[2], s), vmulq_f32(f.v[3], s)}};
}

struct Requantize {
  float32x4_t lo, hi;
  int32x4_t zero_point;
  explicit Requantize(int32_t zp)
      : lo(vdupq_n_f32(static_cast<float>(-zp))), hi(vdupq_n_f32(static_cast<float>(255 - zp))),
        zero_point(vdupq_n_s32(zp)) {}
  uint16x4_t round(float32x4_t v) const {
    // fmaxnm returns the number when the other operand is a quiet NaN (every NaN here is: it
    // comes out of a division or a product), so a NaN becomes the lower bound, as
    // saturate_round's 0.
    v = vminnmq_f32(vmaxnmq_f32(v, lo), hi);
    return vqmovun_s32(vaddq_s32(vcvtnq_s32_f32(v), zero_point));
  }
  void store16(const Float16x& f, uint8_t* y) const {
    const uint16x8_t lo_words = vcombine_u16(round(f.v[0]), round(f.v[1]));
    const uint16x8_t hi_words = vcombine_u16(round(f.v[2]), round(f.v[3]));
    vst1q_u8(y, vcombine_u8(vqmovn_u16(lo_words), vqmovn_u16(hi_words)));
  }
};

// block(a + i, b + i * b_step, c + i) for every step of 16 in [0, n); the last partial step
// reads zero-padded copies and writes a copy of which n % 16 bytes are kept.
template <typename Block>
void byte_steps(const uint8_t* a, const uint8_t* b, int64_t b_step, int64_t n, uint8_t* c, Block block) {
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) block(a + i, b + i * b_step, c + i);
  if (i == n) return;
  const size_t left = static_cast<size_t>(n - i);
  uint8_t a_tail[kStep] = {}, b_tail[kStep] = {}, c_tail[kStep];
  std::memcpy(a_tail, a + i, left);
  if (b_step) std::memcpy(b_tail, b + i, left);
  block(a_tail, b_step ? b_tail : b, c_tail);
  std::memcpy(c + i, c_tail, left);
}

}  // namespace

void quantize_u8_neon(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y) {
  const Requantize out(zero_point);
  const float32x4_t s = vdupq_n_f32(scale);
  auto block = [&](const float* xi, uint8_t* yi) {
    out.store16({{vdivq_f32(vld1q_f32(xi), s), vdivq_f32(vld1q_f32(xi + 4), s), vdivq_f32(vld1q_f32(xi + 8), s),
                  vdivq_f32(vld1q_f32(xi + 12), s)}},
                yi);
  };
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) block(x + i, y + i);
  if (i == n) return;
  const size_t left = static_cast<size_t>(n - i);
  float x_tail[kStep] = {};
  uint8_t y_tail[kStep];
  std::memcpy(x_tail, x + i, left * sizeof(float));
  block(x_tail, y_tail);
  std::memcpy(y + i, y_tail, left);
}

void dequantize_u8_neon(const uint8_t* x, int64_t n, int32_t zero_point, float scale, float* y) {
  const int16x8_t zp = vdupq_n_s16(static_cast<int16_t>(zero_point));
  const float32x4_t s = vdupq_n_f32(scale);
  auto block = [&](const uint8_t* xi, float* yi) {
    const Float16x f = times(to_float(minus_zero_point(xi, zp)), s);
    for (int k = 0; k < 4; ++k) vst1q_f32(yi + 4 * k, f.v[k]);
  };
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) block(x + i, y + i);
  if (i == n) return;
  const size_t left = static_cast<size_t>(n - i);
  uint8_t x_tail[kStep] = {};
  float y_tail[kStep];
  std::memcpy(x_tail, x + i, left);
  block(x_tail, y_tail);
  std::memcpy(y + i, y_tail, left * sizeof(float));
}

void qlinear_add_u8_neon(const uint8_t* a, int32_t za, float ra, const uint8_t* b, int64_t b_step, int32_t zb,
                         float rb, int64_t n, int32_t zc, uint8_t* c) {
  const Requantize out(zc);
  const int16x8_t zpa = vdupq_n_s16(static_cast<int16_t>(za)), zpb = vdupq_n_s16(static_cast<int16_t>(zb));
  const float32x4_t sa = vdupq_n_f32(ra), sb = vdupq_n_f32(rb);
  // One b for the run: its term is the same float every time.
  const float32x4_t b_term = vdupq_n_f32(static_cast<float>(static_cast<int32_t>(b[0]) - zb) * rb);
  byte_steps(a, b, b_step, n, c, [&](const uint8_t* ai, const uint8_t* bi, uint8_t* ci) {
    const Float16x ta = times(to_float(minus_zero_point(ai, zpa)), sa);
    const Float16x tb =
        b_step ? times(to_float(minus_zero_point(bi, zpb)), sb) : Float16x{{b_term, b_term, b_term, b_term}};
    out.store16({{vaddq_f32(ta.v[0], tb.v[0]), vaddq_f32(ta.v[1], tb.v[1]), vaddq_f32(ta.v[2], tb.v[2]),
                  vaddq_f32(ta.v[3], tb.v[3])}},
                ci);
  });
}

void qlinear_mul_u8_neon(const uint8_t* a, int32_t za, const uint8_t* b, int64_t b_step, int32_t zb, float r,
                         int64_t n, int32_t zc, uint8_t* c) {
  const Requantize out(zc);
  const int16x8_t zpa = vdupq_n_s16(static_cast<int16_t>(za)), zpb = vdupq_n_s16(static_cast<int16_t>(zb));
  const float32x4_t scale = vdupq_n_f32(r);
  const int32x4_t b_one = vdupq_n_s32(static_cast<int32_t>(b[0]) - zb);  // one b for the run
  byte_steps(a, b, b_step, n, c, [&](const uint8_t* ai, const uint8_t* bi, uint8_t* ci) {
    const Int16x da = minus_zero_point(ai, zpa);
    const Int16x db = b_step ? minus_zero_point(bi, zpb) : Int16x{{b_one, b_one, b_one, b_one}};
    // |product| <= 255 x 255: exact in int32.
    out.store16(times(to_float({{vmulq_s32(da.v[0], db.v[0]), vmulq_s32(da.v[1], db.v[1]),
                                 vmulq_s32(da.v[2], db.v[2]), vmulq_s32(da.v[3], db.v[3])}}),
                      scale),
                ci);
  });
}

void plane_sums_u8_neon(const uint8_t* x, int64_t planes, int64_t size, int64_t* sums) {
  // uadalp into 16-bit lanes adds at most 2 x 255 a vector: 128 vectors fit before they are
  // widened into the 64-bit total.
  constexpr int64_t kBlock = 128 * 16;
  for (int64_t p = 0; p < planes; ++p, x += size) {
    uint64x2_t total = vdupq_n_u64(0);
    int64_t i = 0;
    while (i + 16 <= size) {
      const int64_t end = i + kBlock < size ? i + kBlock : size;
      uint16x8_t s0 = vdupq_n_u16(0), s1 = vdupq_n_u16(0);
      for (; i + 32 <= end; i += 32) {
        s0 = vpadalq_u8(s0, vld1q_u8(x + i));
        s1 = vpadalq_u8(s1, vld1q_u8(x + i + 16));
      }
      if (i + 16 <= end) {
        s0 = vpadalq_u8(s0, vld1q_u8(x + i));
        i += 16;
      }
      total = vpadalq_u32(total, vaddq_u32(vpaddlq_u16(s0), vpaddlq_u16(s1)));
    }
    int64_t sum = static_cast<int64_t>(vaddvq_u64(total));
    for (; i < size; ++i) sum += x[i];
    sums[p] = sum;
  }
}

}  // namespace edgert::cpu::qrows

#endif

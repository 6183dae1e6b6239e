#include "fast/qconv_shifted.h"

namespace edgert::cpu::qshifted {

namespace {

int64_t packed_depth(const Geometry& g) { return g.kernel_h * g.kernel_w * 4 * ((g.channels + 3) / 4); }

}  // namespace

bool applies(const Geometry& g) {
  return g.channels > 0 && (g.stride == 1 || g.stride == 2) && packed_depth(g) <= gemm::kQgemmMaxDepth;
}

Plan make_plan(const Geometry& g) {
  Plan p;
  p.g = g;
  const int64_t shift = g.stride == 2 ? 1 : 0;  // a tap's offset in its phase: offset >> shift
  const int64_t span_h = ((g.kernel_h - 1) * g.dilation_h) >> shift, span_w = ((g.kernel_w - 1) * g.dilation_w) >> shift;
  p.padded_w = g.out_w + span_w;
  p.padded_h = g.out_h + span_h;
  p.phases = g.stride * g.stride;
  p.channel_groups = (g.channels + 3) / 4;
  p.pixels = (g.out_h - 1) * p.padded_w + g.out_w;
  // The last panel of 32 reads up to 31 pixels past `pixels`, shifted by the largest tap.
  const int64_t read = p.pixels + gemm::kQgemmPanelPixels + span_h * p.padded_w + span_w;
  const int64_t plane = p.padded_h * p.padded_w;
  p.group_pixels = ((read > plane ? read : plane) + 15) / 16 * 16;
  const int64_t phase_pixels = p.channel_groups * p.group_pixels;
  for (int64_t ky = 0; ky < g.kernel_h; ++ky)
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t dy = ky * g.dilation_h, dx = kx * g.dilation_w;
      const int64_t phase = shift ? (dy & 1) * 2 + (dx & 1) : 0;
      p.tap_offsets.push_back(phase * phase_pixels + (dy >> shift) * p.padded_w + (dx >> shift));
    }
  return p;
}

bool pack_weights(const int8_t* w, int64_t m, const Plan& plan, gemm::PackedQRows& out) {
  const Geometry& g = plan.g;
  const int64_t taps = g.kernel_h * g.kernel_w, c4 = 4 * plan.channel_groups, depth = taps * c4;
  if (depth > gemm::kQgemmMaxDepth) return false;
  if (gemm::take_stored_qrows(m, depth, out)) return true;  // W not read
  std::vector<int8_t> by_tap(static_cast<size_t>(m * depth), 0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < g.channels; ++c)
      for (int64_t t = 0; t < taps; ++t) by_tap[static_cast<size_t>(r * depth + t * c4 + c)] = w[(r * g.channels + c) * taps + t];
  return gemm::pack_qrows(by_tap.data(), m, depth, out);
}

}  // namespace edgert::cpu::qshifted

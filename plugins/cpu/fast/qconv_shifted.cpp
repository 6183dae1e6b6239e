#include "fast/qconv_shifted.h"

namespace edgert::cpu::qshifted {

namespace {

int64_t packed_depth(const Geometry& g) { return g.kernel_h * g.kernel_w * 4 * ((g.channels + 3) / 4); }

}  // namespace

bool applies(const Geometry& g) { return g.channels > 0 && packed_depth(g) <= gemm::kQgemmMaxDepth; }

Plan make_plan(const Geometry& g) {
  Plan p;
  p.g = g;
  p.padded_w = g.out_w + (g.kernel_w - 1) * g.dilation_w;
  p.padded_h = g.out_h + (g.kernel_h - 1) * g.dilation_h;
  p.channel_groups = (g.channels + 3) / 4;
  p.pixels = (g.out_h - 1) * p.padded_w + g.out_w;
  // The last panel of 32 reads up to 31 pixels past `pixels`, shifted by the largest tap.
  const int64_t last_tap = (g.kernel_h - 1) * g.dilation_h * p.padded_w + (g.kernel_w - 1) * g.dilation_w;
  const int64_t read = p.pixels + gemm::kQgemmPanelPixels + last_tap;
  const int64_t plane = p.padded_h * p.padded_w;
  p.group_pixels = ((read > plane ? read : plane) + 15) / 16 * 16;
  for (int64_t ky = 0; ky < g.kernel_h; ++ky)
    for (int64_t kx = 0; kx < g.kernel_w; ++kx)
      p.tap_offsets.push_back(ky * g.dilation_h * p.padded_w + kx * g.dilation_w);
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

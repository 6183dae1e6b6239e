// A 1x1 expansion and the depthwise convolution after it, computed band by band (tactic
// f32-conv-1x1-dw-banded-*, an edgert.FusedConv with inputs 5 and 6; see conv.cpp):
//   Y = act(depthwise(act_pre(W_pre X + b_pre), W) + b)
// The expanded tensor (mobilenet_v2's 96 x 112 x 112, 4.8 MB) is never written whole: each
// thread expands the input rows one band of output rows reads into an L2-sized buffer (its
// GEMM one-threaded), then runs the depthwise kernel over the buffer. Consecutive bands of a
// thread share (kernel - stride) rows, moved to the top of the buffer rather than recomputed.
// Written out whole, the expanded tensor's memory is cold at every inference (the model's other
// 14 MB pass through the cache in between): its stores and the depthwise's loads went to DRAM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "activation.h"
#include "fast/depthwise.h"
#include "gemm/sgemm.h"
#include "nn_common.h"

namespace edgert::cpu {

class ExpandDepthwise {
 public:
  // For X [batch, channels, H, W], W_pre [expanded, channels] and a 2-D depthwise geometry `g`
  // over the expanded tensor (3x3 or 5x5, stride 1 or 2, no dilation: depthwise::uses_padded_plane)
  // with weights w [expanded, 1, k, k]. `isa` picks the GEMM micro-kernel and the depthwise
  // kernel of the same ISA. False when the shapes do not apply. Sets info.workspace_bytes.
  bool prepare(gemm::Isa isa, int64_t batch, int64_t channels, int64_t expanded, const WindowGeometry& g,
               const float* w_pre, const float* w, edgert_prepare_info& info);
  // b_pre and b may be null.
  void execute(const float* x, const float* b_pre, const Activation& pre, const float* b, const Activation& activation,
               float* y, void* workspace) const;

  // Output rows per band: the band's input rows of every expanded channel within kBandBytes.
  static int64_t band_rows(int64_t expanded, const WindowGeometry& g);
  // The packed pre-convolution weights and the depthwise weights it holds.
  size_t state_bytes() const { return gemm::state_bytes(packed_) + w_.capacity() * sizeof(float); }

 private:
  // Input rows a band of `rows` output rows reads at most.
  int64_t band_in_rows(int64_t rows) const { return (rows - 1) * g_.stride[0] + g_.kernel[0]; }
  size_t thread_floats() const;

  gemm::Isa isa_ = gemm::Isa::Portable;
  depthwise::ChannelFn channel_ = nullptr;
  gemm::PackedA packed_;
  const float* packed_from_ = nullptr;  // the pre-convolution weights packed_ holds
  const float* w_from_ = nullptr;       // the depthwise weights w_ copies
  std::vector<float> w_;  // the depthwise weights [expanded][k][k]
  WindowGeometry g_;
  int64_t batch_ = 0, channels_ = 0, expanded_ = 0, band_rows_ = 1;
  int threads_ = 1;
};

}  // namespace edgert::cpu

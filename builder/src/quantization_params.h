// The INT8 numbers an engine carries: uint8 asymmetric parameters for activations (one scale
// and zero point per tensor, from the calibrated range) and symmetric int8 weights per output
// channel with their int32 biases.
//
// The arithmetic is ONNX QuantizeLinear's: q = saturate(round_half_even(x / scale) + zero_point)
// with the division in float (not a multiplication by 1 / scale, which rounds differently), so
// an engine's quantized constants match what onnxruntime's QDQ path would compute. Biases divide
// in double: float cannot hold every int32 a large bias needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace edgert::builder {

// Round to nearest, ties to even (QuantizeLinear's rounding), whatever the FPU rounding mode.
double round_half_even(double value);

struct ActivationQuantization {
  float scale = 1;
  uint8_t zero_point = 0;
};

// The range is first widened to hold zero (lo' = min(lo, 0), hi' = max(hi, 0)) so that zero,
// padding and ReLU's floor, is exact; then scale = (hi' - lo') / 255 and
// zero_point = clamp(round_half_even(-lo' / scale), 0, 255). A zero range, or one so small that
// the scale underflows to 0, gets scale 1 and zero point 0 (every value then quantizes to the
// zero point, within the range's width of its true value). Throws BuildError
// (EDGERT_ERR_INVALID_ARGUMENT) naming `tensor` when lo > hi or either is not finite.
ActivationQuantization activation_quantization(const std::string& tensor, float lo, float hi);

struct WeightQuantization {
  std::vector<int8_t> values;  // same layout as the float weights
  std::vector<float> scales;   // one per output channel (shape[0])
};

// Symmetric per-output-channel int8: for each channel m of a [M, ...] tensor,
// scale[m] = max|w| / 127 (1 for an all-zero channel) and q = clamp(round_half_even(w / scale),
// -127, 127); -128 is never used, so negating a weight cannot overflow. Throws BuildError
// (EDGERT_ERR_INVALID_ARGUMENT) naming `tensor` when the shape is empty, has a dimension < 1
// or does not match the number of values, or a weight is NaN or infinite.
WeightQuantization quantize_weights_per_channel(const std::string& tensor, const std::vector<float>& weights,
                                                const std::vector<int64_t>& shape);

// int32 bias of output channel m: round_half_even(b[m] / (input_scale * weight_scales[m])),
// the scale product in float as QuantizeLinear's caller would compute it, saturated to int32
// (a NaN bias or a scale product of 0 with a zero bias gives 0). Throws BuildError
// (EDGERT_ERR_INVALID_ARGUMENT) naming `tensor` when the sizes differ or a scale is not a
// positive finite number.
std::vector<int32_t> quantize_bias(const std::string& tensor, const std::vector<float>& bias, float input_scale,
                                   const std::vector<float>& weight_scales);

}  // namespace edgert::builder

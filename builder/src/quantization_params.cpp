#include "quantization_params.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "build_error.h"

namespace edgert::builder {

double round_half_even(double value) {
  double floor = std::floor(value);
  double fraction = value - floor;  // exact: a double's fractional part is representable
  if (fraction > 0.5) return floor + 1;
  if (fraction == 0.5) return std::fmod(floor, 2) == 0 ? floor : floor + 1;
  return floor;
}

ActivationQuantization activation_quantization(const std::string& tensor, float lo, float hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "tensor '%s': calibrated range [%g, %g] is not a finite range with lo <= hi: cannot quantize it",
               tensor.c_str(), lo, hi);
  const float low = std::min(lo, 0.0f), high = std::max(hi, 0.0f);
  ActivationQuantization q;
  float scale = (high - low) / 255.0f;
  if (!std::isfinite(scale))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "tensor '%s': calibrated range [%g, %g] is wider than float can step through in 255 levels",
               tensor.c_str(), lo, hi);
  if (scale == 0) return q;
  q.scale = scale;
  double zero_point = round_half_even(-low / scale);
  q.zero_point = static_cast<uint8_t>(std::clamp(zero_point, 0.0, 255.0));
  return q;
}

WeightQuantization quantize_weights_per_channel(const std::string& tensor, const std::vector<float>& weights,
                                                const std::vector<int64_t>& shape) {
  if (shape.empty())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "weight '%s' is a scalar: per-output-channel quantization needs a shape [M, ...]", tensor.c_str());
  size_t count = 1;
  for (int64_t d : shape) {
    if (d < 1)
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "weight '%s' has a dimension of %lld: cannot quantize it per channel",
                 tensor.c_str(), static_cast<long long>(d));
    count *= static_cast<size_t>(d);
  }
  if (count != weights.size())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "weight '%s': its shape holds %zu values but %zu were given",
               tensor.c_str(), count, weights.size());
  for (size_t i = 0; i < weights.size(); ++i)
    if (!std::isfinite(weights[i]))
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "weight '%s' has %g at flat index %zu: cannot quantize it to int8",
                 tensor.c_str(), weights[i], i);

  const size_t channels = static_cast<size_t>(shape[0]);
  const size_t per_channel = count / channels;
  WeightQuantization result;
  result.values.resize(count);
  result.scales.resize(channels);
  for (size_t m = 0; m < channels; ++m) {
    const float* w = weights.data() + m * per_channel;
    float largest = 0;
    for (size_t i = 0; i < per_channel; ++i) largest = std::max(largest, std::fabs(w[i]));
    float scale = largest / 127.0f;
    // An all-zero channel, or one so small that the scale underflows: every weight becomes 0.
    if (scale == 0) scale = 1;
    result.scales[m] = scale;
    int8_t* q = result.values.data() + m * per_channel;
    for (size_t i = 0; i < per_channel; ++i) {
      float ratio = w[i] / scale;
      q[i] = static_cast<int8_t>(std::clamp(round_half_even(ratio), -127.0, 127.0));
    }
  }
  return result;
}

std::vector<int32_t> quantize_bias(const std::string& tensor, const std::vector<float>& bias, float input_scale,
                                   const std::vector<float>& weight_scales) {
  if (bias.size() != weight_scales.size())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "bias '%s' has %zu values but its weight has %zu output channels",
               tensor.c_str(), bias.size(), weight_scales.size());
  if (!(std::isfinite(input_scale) && input_scale > 0))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "bias '%s': input scale %g is not a positive finite number",
               tensor.c_str(), input_scale);
  constexpr double kLowest = std::numeric_limits<int32_t>::min(), kHighest = std::numeric_limits<int32_t>::max();
  std::vector<int32_t> result(bias.size());
  for (size_t m = 0; m < bias.size(); ++m) {
    if (!(std::isfinite(weight_scales[m]) && weight_scales[m] > 0))
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "bias '%s': weight scale %g of channel %zu is not a positive finite number",
                 tensor.c_str(), weight_scales[m], m);
    float bias_scale = input_scale * weight_scales[m];
    double q = round_half_even(static_cast<double>(bias[m]) / static_cast<double>(bias_scale));
    result[m] = std::isnan(q) ? 0 : static_cast<int32_t>(std::clamp(q, kLowest, kHighest));
  }
  return result;
}

}  // namespace edgert::builder

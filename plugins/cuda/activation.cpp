#include "activation.cuh"

namespace edgert::cuda {

Activation Activation::parse(const std::string& name, const float* params, size_t count) {
  static const std::pair<const char*, ActivationKind> kinds[] = {
      {"", ActivationKind::None},         {"Relu", ActivationKind::Relu},
      {"Clip", ActivationKind::Clip},     {"Sigmoid", ActivationKind::Sigmoid},
      {"Tanh", ActivationKind::Tanh},     {"HardSwish", ActivationKind::HardSwish},
      {"HardSigmoid", ActivationKind::HardSigmoid}, {"LeakyRelu", ActivationKind::LeakyRelu},
      {"Gelu", ActivationKind::Gelu},     {"SiLU", ActivationKind::SiLU}};
  Activation a;
  bool found = false;
  for (const auto& [n, k] : kinds)
    if (name == n) {
      a.kind = k;
      found = true;
    }
  if (!found) fail(EDGERT_ERR_UNSUPPORTED, "unknown fused activation '%s'", name.c_str());
  const size_t needed = a.kind == ActivationKind::Clip || a.kind == ActivationKind::HardSigmoid ? 2
                        : a.kind == ActivationKind::LeakyRelu || a.kind == ActivationKind::Gelu ? 1 : 0;
  if (count < needed)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "activation '%s' needs %zu parameters, got %zu", name.c_str(), needed, count);
  if (count > 0) a.p0 = params[0];
  if (count > 1) a.p1 = params[1];
  return a;
}

Activation Activation::from_node(const edgert_node& node) {
  Attributes attrs(&node);
  std::vector<float> params = attrs.get_floats("activation_params");
  return parse(attrs.get_string("activation", ""), params.data(), params.size());
}

}  // namespace edgert::cuda

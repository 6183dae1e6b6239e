#include "input_shapes.h"

#include <cstdlib>

#include "build_error.h"
#include "engine_inputs.h"
#include "error.h"

namespace edgert::cli {
namespace {

std::string joined_names(const std::vector<std::string>& names) {
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  return all;
}

bool is_input(const LoadedEngine& engine, const std::string& name) {
  for (const std::string& n : engine.input_names())
    if (n == name) return true;
  return false;
}

// Seeded normal floats at `shape` (zeros for other dtypes), as synthetic_input fills them.
HostTensor synthetic_at(const LoadedEngine& engine, size_t index, const std::vector<int64_t>& shape, std::mt19937& rng) {
  const LoadedTensor& t = engine.main_graph().tensors[engine.input_tensors()[index]];
  HostTensor h;
  h.name = engine.input_names()[index];
  h.dtype = static_cast<edgert_dtype>(t.dtype ? t.dtype : EDGERT_DTYPE_FLOAT32);
  h.shape = shape;
  size_t elem = dtype_size(h.dtype);
  if (elem == 0)
    builder::build_fail(EDGERT_ERR_UNSUPPORTED, "input '%s' has dtype %s, which cannot be synthesised; give it with --input",
                        h.name.c_str(), dtype_name(h.dtype));
  h.data.assign(static_cast<size_t>(h.numel()) * elem, 0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (h.dtype == EDGERT_DTYPE_FLOAT32) {
    float* p = reinterpret_cast<float*>(h.data.data());
    for (int64_t i = 0; i < h.numel(); ++i) p[i] = normal(rng);
  } else if (h.dtype == EDGERT_DTYPE_FLOAT64) {
    double* p = reinterpret_cast<double*>(h.data.data());
    for (int64_t i = 0; i < h.numel(); ++i) p[i] = normal(rng);
  }
  return h;
}

}  // namespace

InputShapes parse_input_shapes(const std::vector<std::string>& values) {
  InputShapes shapes;
  for (const std::string& value : values) {
    size_t start = 0;
    while (start < value.size()) {
      size_t comma = value.find(',', start);
      std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? value.size() : comma + 1;
      size_t colon = item.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
        builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--shapes: '%s' must be NAME:DxDx... (e.g. input:1x3x224x224)",
                            item.c_str());
      std::vector<int64_t> dims;
      const std::string text = item.substr(colon + 1);
      size_t pos = 0;
      while (true) {
        size_t x = text.find('x', pos);
        std::string d = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
        char* end = nullptr;
        long long v = std::strtoll(d.c_str(), &end, 10);
        if (d.empty() || *end != '\0' || v < 0)
          builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--shapes: '%s' is not a dimension in '%s'", d.c_str(),
                              item.c_str());
        dims.push_back(v);
        if (x == std::string::npos) break;
        pos = x + 1;
      }
      shapes[item.substr(0, colon)] = dims;
    }
  }
  return shapes;
}

std::vector<HostTensor> engine_inputs(const LoadedEngine& engine, std::map<std::string, HostTensor> given,
                                      const InputShapes& shapes, bool synthesise_unshaped, std::mt19937& rng) {
  const std::string names = joined_names(engine.input_names());
  for (const auto& [name, tensor] : given)
    if (!is_input(engine, name))
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--input names '%s', which is not an engine input (inputs: %s)",
                          name.c_str(), names.c_str());
  for (const auto& [name, dims] : shapes)
    if (!is_input(engine, name))
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--shapes names '%s', which is not an engine input (inputs: %s)",
                          name.c_str(), names.c_str());
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < engine.input_names().size(); ++i) {
    const std::string& name = engine.input_names()[i];
    auto tensor = given.find(name);
    auto shape = shapes.find(name);
    if (tensor != given.end()) {
      if (shape != shapes.end() && tensor->second.shape != shape->second)
        builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "input '%s': the --input file has shape %s, --shapes says %s",
                            name.c_str(), shape_string(tensor->second.shape).c_str(),
                            shape_string(shape->second).c_str());
      inputs.push_back(std::move(tensor->second));
      inputs.back().name = name;
    } else if (shape != shapes.end()) {
      inputs.push_back(synthetic_at(engine, i, shape->second, rng));
    } else if (synthesise_unshaped) {
      inputs.push_back(synthetic_input(engine, i, rng));
    } else {
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "no data for engine input '%s' (inputs: %s): give --input %s=FILE, "
                          "or --shapes %s:DxD... to run on seeded random values", name.c_str(), names.c_str(),
                          name.c_str(), name.c_str());
    }
  }
  return inputs;
}

}  // namespace edgert::cli

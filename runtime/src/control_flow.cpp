#include "control_flow.h"

#include <cstring>
#include <string>

#include "error.h"
#include "node_attributes.h"

namespace edgert {
namespace {

// Values the control-flow op owns between subgraph runs: tensors, sequences, or none.
using HostTensor = OwnedValue;

const edgert_tensor* input_or_null(const LoadedNode& node, const std::vector<edgert_tensor>& values, size_t i) {
  if (i >= node.inputs.size() || node.inputs[i] < 0) return nullptr;
  return &values[node.inputs[i]];
}

bool read_bool(const edgert_tensor& t) {
  return t.data && (t.dtype == EDGERT_DTYPE_BOOL ? *static_cast<const uint8_t*>(t.data) != 0
                                                 : *static_cast<const int64_t*>(t.data) != 0);
}

int64_t numel(const edgert_tensor& t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t.rank; ++d) n *= t.dims[d];
  return n;
}

// Writes `value` as node output `index` (copied into the executor).
edgert_status emit(GraphExecutor& executor, const LoadedNode& node, size_t index, const edgert_tensor& value,
                   edgert_error* error) {
  if (index >= node.outputs.size()) return EDGERT_OK;
  return executor.set_value(node.outputs[index], value, node.node.name, error);
}

// Bytes of one step along `axis`: outer count, contiguous inner bytes.
void axis_geometry(const edgert_tensor& t, int32_t axis, int64_t* outer, size_t* inner) {
  *outer = 1;
  for (int32_t d = 0; d < axis; ++d) *outer *= t.dims[d];
  size_t in = dtype_size(t.dtype);
  for (int32_t d = axis + 1; d < t.rank; ++d) in *= static_cast<size_t>(t.dims[d]);
  *inner = in;
}

HostTensor slice_along(const edgert_tensor& t, int32_t axis, int64_t index) {
  HostTensor h;
  h.desc.dtype = t.dtype;
  h.desc.rank = t.rank - 1;
  for (int32_t d = 0, k = 0; d < t.rank; ++d)
    if (d != axis) h.desc.dims[k++] = t.dims[d];
  int64_t outer;
  size_t inner;
  axis_geometry(t, axis, &outer, &inner);
  h.bytes.resize(static_cast<size_t>(outer) * inner);
  const uint8_t* src = static_cast<const uint8_t*>(t.data);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(h.bytes.data() + o * inner, src + (o * t.dims[axis] + index) * inner, inner);
  return h;
}

// Stacks `steps` element tensors (same shape) along a new `axis`; step t goes to position
// reverse ? n-1-t : t.
edgert_status stack_along(const std::vector<HostTensor>& steps, const edgert_tensor& element, int32_t axis, bool reverse,
                          HostTensor* out, const char* node_name, edgert_error* error) {
  int64_t n = static_cast<int64_t>(steps.size());
  out->desc.dtype = element.dtype;
  out->desc.rank = element.rank + 1;
  if (axis < 0 || axis > element.rank || out->desc.rank > EDGERT_MAX_RANK)
    return set_error(error, EDGERT_ERR_SHAPE, "node '%s': scan output axis %d is out of range", node_name, axis);
  for (int32_t d = 0, k = 0; d < out->desc.rank; ++d) out->desc.dims[d] = d == axis ? n : element.dims[k++];
  int64_t outer = 1;
  for (int32_t d = 0; d < axis; ++d) outer *= element.dims[d];
  size_t inner = dtype_size(element.dtype);
  for (int32_t d = axis; d < element.rank; ++d) inner *= static_cast<size_t>(element.dims[d]);
  out->bytes.resize(static_cast<size_t>(outer * n) * inner);
  for (int64_t t = 0; t < n; ++t) {
    if (steps[t].bytes.size() != static_cast<size_t>(outer) * inner)
      return set_error(error, EDGERT_ERR_SHAPE, "node '%s': scan output changes shape between iterations", node_name);
    int64_t pos = reverse ? n - 1 - t : t;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out->bytes.data() + (o * n + pos) * inner, steps[t].bytes.data() + o * inner, inner);
  }
  return EDGERT_OK;
}

// One Scan over already-sliced operands (opset 9 semantics).
edgert_status scan_core(GraphExecutor& executor, const LoadedNode& node, std::vector<HostTensor> states,
                        const std::vector<edgert_tensor>& scan_inputs, std::vector<HostTensor>* final_states,
                        std::vector<HostTensor>* scan_outputs, edgert_error* error) {
  GraphExecutor& body = executor.subgraph(node.body_graph);
  size_t n_states = states.size(), n_scan = scan_inputs.size();
  std::vector<int64_t> in_axes = ints_attribute(node, "scan_input_axes"), in_dirs = ints_attribute(node, "scan_input_directions");
  std::vector<int64_t> out_axes = ints_attribute(node, "scan_output_axes"), out_dirs = ints_attribute(node, "scan_output_directions");
  if (n_scan == 0) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "node '%s': Scan needs a scan input", node.node.name);
  int64_t length = -1;
  std::vector<int32_t> axes(n_scan);
  for (size_t i = 0; i < n_scan; ++i) {
    int64_t axis = i < in_axes.size() ? in_axes[i] : 0;
    if (axis < 0) axis += scan_inputs[i].rank;
    if (axis < 0 || axis >= scan_inputs[i].rank)
      return set_error(error, EDGERT_ERR_SHAPE, "node '%s': scan input %zu has no axis %lld", node.node.name, i,
                       static_cast<long long>(axis));
    axes[i] = static_cast<int32_t>(axis);
    if (length >= 0 && scan_inputs[i].dims[axis] != length)
      return set_error(error, EDGERT_ERR_SHAPE, "node '%s': scan inputs have different lengths", node.node.name);
    length = scan_inputs[i].dims[axis];
  }
  size_t n_body_outputs = body.graph().outputs.size();
  if (n_body_outputs < n_states || body.graph().inputs.size() != n_states + n_scan)
    return set_error(error, EDGERT_ERR_SHAPE, "node '%s': Scan body takes %zu inputs and gives %zu outputs for %zu "
                     "states and %zu scan inputs", node.node.name, body.graph().inputs.size(), n_body_outputs, n_states, n_scan);
  size_t n_scan_out = n_body_outputs - n_states;
  std::vector<std::vector<HostTensor>> steps(n_scan_out);
  std::vector<edgert_tensor> elements(n_scan_out);
  for (int64_t t = 0; t < length; ++t) {
    std::vector<HostTensor> slices;
    for (size_t i = 0; i < n_scan; ++i) {
      bool reverse = i < in_dirs.size() && in_dirs[i] == 1;
      slices.push_back(slice_along(scan_inputs[i], axes[i], reverse ? length - 1 - t : t));
    }
    std::vector<edgert_tensor> body_inputs;
    for (HostTensor& s : states) body_inputs.push_back(s.view());
    for (HostTensor& s : slices) body_inputs.push_back(s.view());
    if (edgert_status s = body.run(body_inputs.data(), body_inputs.size(), error)) {
      prefix_error(error, "node '%s' (Scan) iteration %lld", node.node.name, static_cast<long long>(t));
      return s;
    }
    for (size_t j = 0; j < n_states; ++j) states[j] = HostTensor::copy_of(body.output(j));
    for (size_t k = 0; k < n_scan_out; ++k) {
      steps[k].push_back(HostTensor::copy_of(body.output(n_states + k)));
      elements[k] = body.output(n_states + k);
    }
  }
  body.release_activations();
  *final_states = std::move(states);
  scan_outputs->resize(n_scan_out);
  for (size_t k = 0; k < n_scan_out; ++k) {
    int64_t axis = k < out_axes.size() ? out_axes[k] : 0;
    if (axis < 0) axis += elements[k].rank + 1;
    bool reverse = k < out_dirs.size() && out_dirs[k] == 1;
    if (length == 0) {
      (*scan_outputs)[k].desc.dtype = EDGERT_DTYPE_FLOAT32;
      (*scan_outputs)[k].desc.rank = 1;
      continue;
    }
    if (edgert_status s = stack_along(steps[k], elements[k], static_cast<int32_t>(axis), reverse, &(*scan_outputs)[k],
                                      node.node.name, error))
      return s;
  }
  return EDGERT_OK;
}

}  // namespace

edgert_status run_if(GraphExecutor& executor, const LoadedNode& node, const std::vector<edgert_tensor>& values,
                     edgert_error* error) {
  const edgert_tensor* cond = input_or_null(node, values, 0);
  if (!cond || numel(*cond) != 1)
    return set_error(error, EDGERT_ERR_SHAPE, "node '%s' (If): the condition must hold one value", node.node.name);
  int32_t branch = read_bool(*cond) ? node.then_graph : node.else_graph;
  if (branch < 0) return set_error(error, EDGERT_ERR_FORMAT, "node '%s' (If) lacks a branch", node.node.name);
  GraphExecutor& sub = executor.subgraph(branch);
  if (edgert_status s = sub.run(nullptr, 0, error)) {
    prefix_error(error, "node '%s' (If, %s branch)", node.node.name, branch == node.then_graph ? "then" : "else");
    return s;
  }
  if (sub.graph().outputs.size() != node.outputs.size())
    return set_error(error, EDGERT_ERR_SHAPE, "node '%s' (If): branch gives %zu outputs, the node has %zu",
                     node.node.name, sub.graph().outputs.size(), node.outputs.size());
  for (size_t i = 0; i < node.outputs.size(); ++i)
    if (edgert_status s = emit(executor, node, i, sub.output(i), error)) return s;
  sub.release_activations();
  return EDGERT_OK;
}

edgert_status run_loop(GraphExecutor& executor, const LoadedNode& node, const std::vector<edgert_tensor>& values,
                       edgert_error* error) {
  const edgert_tensor* trip = input_or_null(node, values, 0);
  const edgert_tensor* cond_in = input_or_null(node, values, 1);
  int64_t max_trip = trip && numel(*trip) == 1 ? *static_cast<const int64_t*>(trip->data) : INT64_MAX;
  bool cond = cond_in && numel(*cond_in) == 1 ? read_bool(*cond_in) : true;
  size_t n_carried = node.inputs.size() > 2 ? node.inputs.size() - 2 : 0;
  std::vector<HostTensor> carried;
  for (size_t j = 0; j < n_carried; ++j) carried.push_back(HostTensor::copy_of(values[node.inputs[2 + j]]));

  GraphExecutor& body = executor.subgraph(node.body_graph);
  size_t n_body_outputs = body.graph().outputs.size();
  if (body.graph().inputs.size() != 2 + n_carried || n_body_outputs < 1 + n_carried)
    return set_error(error, EDGERT_ERR_SHAPE, "node '%s' (Loop): body takes %zu inputs and gives %zu outputs for %zu "
                     "loop-carried values", node.node.name, body.graph().inputs.size(), n_body_outputs, n_carried);
  size_t n_scan = n_body_outputs - 1 - n_carried;
  std::vector<std::vector<HostTensor>> steps(n_scan);
  std::vector<edgert_tensor> elements(n_scan);
  constexpr int64_t kMaxIterations = 100'000'000;  // a bound, so a runaway loop ends with an error
  int64_t i = 0;
  for (; i < max_trip && cond; ++i) {
    if (i >= kMaxIterations)
      return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "node '%s' (Loop) ran %lld iterations without ending",
                       node.node.name, static_cast<long long>(i));
    int64_t iteration = i;
    uint8_t cond_byte = 1;
    std::vector<edgert_tensor> inputs;
    inputs.push_back(edgert_tensor{EDGERT_DTYPE_INT64, 0, {}, &iteration});
    inputs.push_back(edgert_tensor{EDGERT_DTYPE_BOOL, 0, {}, &cond_byte});
    for (HostTensor& c : carried) inputs.push_back(c.view());
    if (edgert_status s = body.run(inputs.data(), inputs.size(), error)) {
      prefix_error(error, "node '%s' (Loop) iteration %lld", node.node.name, static_cast<long long>(i));
      return s;
    }
    cond = read_bool(body.output(0));
    for (size_t j = 0; j < n_carried; ++j) carried[j] = HostTensor::copy_of(body.output(1 + j));
    for (size_t k = 0; k < n_scan; ++k) {
      steps[k].push_back(HostTensor::copy_of(body.output(1 + n_carried + k)));
      elements[k] = body.output(1 + n_carried + k);
    }
  }
  body.release_activations();
  for (size_t j = 0; j < n_carried; ++j)
    if (edgert_status s = emit(executor, node, j, carried[j].view(), error)) return s;
  for (size_t k = 0; k < n_scan; ++k) {
    HostTensor stacked;
    if (i == 0) {
      stacked.desc.dtype = EDGERT_DTYPE_FLOAT32;
      stacked.desc.rank = 1;
    } else if (edgert_status s = stack_along(steps[k], elements[k], 0, false, &stacked, node.node.name, error)) {
      return s;
    }
    if (edgert_status s = emit(executor, node, n_carried + k, stacked.view(), error)) return s;
  }
  return EDGERT_OK;
}

edgert_status run_scan(GraphExecutor& executor, const LoadedNode& node, const std::vector<edgert_tensor>& values,
                       edgert_error* error) {
  int64_t num_scan_inputs = int_attribute(node, "num_scan_inputs", -1);
  bool opset8 = node.node.opset < 9;
  size_t first = opset8 ? 1 : 0;  // opset 8 starts with the optional sequence_lens
  if (num_scan_inputs < 1 || first + static_cast<size_t>(num_scan_inputs) > node.inputs.size())
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "node '%s' (Scan): num_scan_inputs %lld does not fit its %zu "
                     "inputs", node.node.name, static_cast<long long>(num_scan_inputs), node.inputs.size());
  size_t n_states = node.inputs.size() - first - static_cast<size_t>(num_scan_inputs);
  std::vector<edgert_tensor> state_in, scan_in;
  for (size_t j = 0; j < n_states; ++j) state_in.push_back(values[node.inputs[first + j]]);
  for (size_t i = first + n_states; i < node.inputs.size(); ++i) scan_in.push_back(values[node.inputs[i]]);

  if (!opset8) {
    std::vector<HostTensor> states, final_states, scan_outputs;
    for (const edgert_tensor& s : state_in) states.push_back(HostTensor::copy_of(s));
    if (edgert_status s = scan_core(executor, node, std::move(states), scan_in, &final_states, &scan_outputs, error))
      return s;
    for (size_t j = 0; j < final_states.size(); ++j)
      if (edgert_status s = emit(executor, node, j, final_states[j].view(), error)) return s;
    for (size_t k = 0; k < scan_outputs.size(); ++k)
      if (edgert_status s = emit(executor, node, n_states + k, scan_outputs[k].view(), error)) return s;
    return EDGERT_OK;
  }

  // Opset 8: every operand has a leading batch axis; scan each batch entry along axis 1 -> 0.
  if (state_in.empty() && scan_in.empty()) return EDGERT_OK;
  int64_t batch = (state_in.empty() ? scan_in[0] : state_in[0]).dims[0];
  std::vector<std::vector<HostTensor>> state_steps(n_states), scan_steps;
  std::vector<edgert_tensor> state_elems(n_states), scan_elems;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<HostTensor> states, final_states, scan_outputs;
    for (const edgert_tensor& s : state_in) states.push_back(slice_along(s, 0, b));
    std::vector<HostTensor> slices;
    std::vector<edgert_tensor> views;
    for (const edgert_tensor& s : scan_in) slices.push_back(slice_along(s, 0, b));
    for (HostTensor& s : slices) views.push_back(s.view());
    if (edgert_status s = scan_core(executor, node, std::move(states), views, &final_states, &scan_outputs, error))
      return s;
    scan_steps.resize(scan_outputs.size());
    scan_elems.resize(scan_outputs.size());
    for (size_t j = 0; j < n_states; ++j) {
      state_elems[j] = final_states[j].view();
      state_steps[j].push_back(std::move(final_states[j]));
    }
    for (size_t k = 0; k < scan_outputs.size(); ++k) {
      scan_elems[k] = scan_outputs[k].view();
      scan_steps[k].push_back(std::move(scan_outputs[k]));
    }
  }
  for (size_t j = 0; j < n_states; ++j) {
    HostTensor stacked;
    if (edgert_status s = stack_along(state_steps[j], state_elems[j], 0, false, &stacked, node.node.name, error)) return s;
    if (edgert_status s = emit(executor, node, j, stacked.view(), error)) return s;
  }
  for (size_t k = 0; k < scan_steps.size(); ++k) {
    HostTensor stacked;
    if (edgert_status s = stack_along(scan_steps[k], scan_elems[k], 0, false, &stacked, node.node.name, error)) return s;
    if (edgert_status s = emit(executor, node, n_states + k, stacked.view(), error)) return s;
  }
  return EDGERT_OK;
}

}  // namespace edgert

#include "gpu_test_support.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "edgert/dtype_info.h"
#include "plugin_loader.h"

namespace edgert::gpu_test {

// NodeSpec

NodeSpec& NodeSpec::operator=(const NodeSpec& other) {
  if (this != &other) {
    stored_ = other.stored_;
    rebuild();
  }
  return *this;
}

void NodeSpec::rebuild() {
  attrs_.clear();
  string_pointers_.clear();
  for (const Stored& s : stored_) {
    edgert_attribute a{};
    a.name = s.name.c_str();
    a.type = s.type;
    a.i = s.i;
    a.f = s.f;
    a.s = s.s.c_str();
    a.s_len = s.s.size();
    switch (s.type) {
      case EDGERT_ATTR_INTS:
        a.ints = s.ints.data();
        a.count = s.ints.size();
        break;
      case EDGERT_ATTR_FLOATS:
        a.floats = s.floats.data();
        a.count = s.floats.size();
        break;
      case EDGERT_ATTR_STRINGS: {
        std::vector<const char*>& p = string_pointers_.emplace_back();
        for (const std::string& v : s.strings) p.push_back(v.c_str());
        a.strings = p.data();
        a.count = p.size();
        break;
      }
      default: break;
    }
    attrs_.push_back(a);
  }
}

NodeSpec& NodeSpec::ints(const char* name, std::vector<int64_t> v) {
  Stored s;
  s.name = name;
  s.type = EDGERT_ATTR_INTS;
  s.ints = std::move(v);
  stored_.push_back(std::move(s));
  rebuild();
  return *this;
}

NodeSpec& NodeSpec::integer(const char* name, int64_t v) {
  Stored s;
  s.name = name;
  s.type = EDGERT_ATTR_INT;
  s.i = v;
  stored_.push_back(std::move(s));
  rebuild();
  return *this;
}

NodeSpec& NodeSpec::real(const char* name, float v) {
  Stored s;
  s.name = name;
  s.type = EDGERT_ATTR_FLOAT;
  s.f = v;
  stored_.push_back(std::move(s));
  rebuild();
  return *this;
}

NodeSpec& NodeSpec::string(const char* name, const std::string& v) {
  Stored s;
  s.name = name;
  s.type = EDGERT_ATTR_STRING;
  s.s = v;
  stored_.push_back(std::move(s));
  rebuild();
  return *this;
}

NodeSpec& NodeSpec::floats(const char* name, std::vector<float> v) {
  Stored s;
  s.name = name;
  s.type = EDGERT_ATTR_FLOATS;
  s.floats = std::move(v);
  stored_.push_back(std::move(s));
  rebuild();
  return *this;
}

NodeSpec& NodeSpec::strings(const char* name, std::vector<std::string> v) {
  Stored s;
  s.name = name;
  s.type = EDGERT_ATTR_STRINGS;
  s.strings = std::move(v);
  stored_.push_back(std::move(s));
  rebuild();
  return *this;
}

// Float16

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// Round to nearest even.
uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {                                                // subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;
    uint32_t value = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (value & 1u))) ++value;
    return static_cast<uint16_t>(sign | value);
  }
  uint32_t value = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (value & 1u))) ++value;
  return static_cast<uint16_t>(sign | value);
}

// HostTensor

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

size_t HostTensor::element_size() const { return edgert_dtype_size(dtype); }

double HostTensor::at(int64_t i) const {
  const uint8_t* p = bytes.data() + static_cast<size_t>(i) * element_size();
  auto read = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return static_cast<double>(v);
  };
  switch (dtype) {
    case EDGERT_DTYPE_FLOAT32: return read(float{});
    case EDGERT_DTYPE_FLOAT64: return read(double{});
    case EDGERT_DTYPE_FLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return half_to_float(h);
    }
    case EDGERT_DTYPE_INT8: return read(int8_t{});
    case EDGERT_DTYPE_UINT8: return read(uint8_t{});
    case EDGERT_DTYPE_INT16: return read(int16_t{});
    case EDGERT_DTYPE_UINT16: return read(uint16_t{});
    case EDGERT_DTYPE_INT32: return read(int32_t{});
    case EDGERT_DTYPE_UINT32: return read(uint32_t{});
    case EDGERT_DTYPE_INT64: return read(int64_t{});
    case EDGERT_DTYPE_UINT64: return read(uint64_t{});
    case EDGERT_DTYPE_BOOL: return p[0];
    default: throw std::runtime_error("HostTensor::at: unsupported dtype");
  }
}

namespace {

template <typename T>
HostTensor make(edgert_dtype dtype, Dims dims, const std::vector<T>& values) {
  HostTensor t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  if (static_cast<int64_t>(values.size()) != t.numel()) throw std::runtime_error("HostTensor: value count does not match dims");
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

}  // namespace

HostTensor HostTensor::floats(Dims dims, const std::vector<float>& values) {
  return make(EDGERT_DTYPE_FLOAT32, std::move(dims), values);
}

HostTensor HostTensor::halves(Dims dims, const std::vector<float>& values) {
  std::vector<uint16_t> h;
  for (float v : values) h.push_back(float_to_half(v));
  return make(EDGERT_DTYPE_FLOAT16, std::move(dims), h);
}

HostTensor HostTensor::int64s(Dims dims, const std::vector<int64_t>& values) {
  return make(EDGERT_DTYPE_INT64, std::move(dims), values);
}

HostTensor HostTensor::int32s(Dims dims, const std::vector<int32_t>& values) {
  return make(EDGERT_DTYPE_INT32, std::move(dims), values);
}

HostTensor HostTensor::bools(Dims dims, const std::vector<bool>& values) {
  std::vector<uint8_t> b(values.begin(), values.end());
  return make(EDGERT_DTYPE_BOOL, std::move(dims), b);
}

HostTensor HostTensor::random(Dims dims, std::mt19937& rng, float lo, float hi) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return floats(std::move(dims), v);
}

HostTensor HostTensor::random_signed(Dims dims, std::mt19937& rng, float lo, float hi) {
  HostTensor t = random(std::move(dims), rng, lo, hi);
  std::bernoulli_distribution negative(0.5);
  float* p = reinterpret_cast<float*>(t.bytes.data());
  for (int64_t i = 0; i < t.numel(); ++i)
    if (negative(rng)) p[i] = -p[i];
  return t;
}

HostTensor HostTensor::converted(edgert_dtype to) const {
  if (to == dtype) return *this;
  HostTensor t;
  t.dtype = to;
  t.dims = dims;
  const int64_t n = numel();
  if (dtype == EDGERT_DTYPE_FLOAT32 && to == EDGERT_DTYPE_FLOAT16) {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = float_to_half(static_cast<float>(at(i)));
    return make(to, dims, h);
  }
  if (dtype == EDGERT_DTYPE_FLOAT16 && to == EDGERT_DTYPE_FLOAT32) {
    std::vector<float> f(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) f[static_cast<size_t>(i)] = static_cast<float>(at(i));
    return make(to, dims, f);
  }
  throw std::runtime_error("HostTensor::converted: only float32 <-> float16");
}

namespace {

// Reorders the bytes of a rank-4 tensor between NCHW and NHWC storage; dims stay logical.
HostTensor reorder(const HostTensor& t, bool to_nhwc) {
  if (t.dims.size() != 4) throw std::runtime_error("NCHW <-> NHWC of a tensor that is not rank 4");
  const int64_t n = t.dims[0], c = t.dims[1], h = t.dims[2], w = t.dims[3];
  const size_t e = t.element_size();
  HostTensor out = t;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw) {
          const int64_t nchw = ((in * c + ic) * h + ih) * w + iw;
          const int64_t nhwc = ((in * h + ih) * w + iw) * c + ic;
          const int64_t from = to_nhwc ? nchw : nhwc, to = to_nhwc ? nhwc : nchw;
          std::memcpy(out.bytes.data() + static_cast<size_t>(to) * e, t.bytes.data() + static_cast<size_t>(from) * e, e);
        }
  return out;
}

}  // namespace

HostTensor HostTensor::nchw_to_nhwc() const { return reorder(*this, true); }
HostTensor HostTensor::nhwc_to_nchw() const { return reorder(*this, false); }

// Plugins

namespace {

const LoadedPlugin& plugin(const std::string& name) {
  static std::map<std::string, const LoadedPlugin*> loaded;
  auto it = loaded.find(name);
  if (it != loaded.end()) return *it->second;
  edgert_error error{};
  // The build's plugins, or those $EDGERT_PLUGIN_PATH names (a bundle on the GPU machine).
  const char* moved = std::getenv("EDGERT_PLUGIN_PATH");
  const LoadedPlugin* p =
      load_plugin(name, plugin_search_path(moved && *moved ? moved : EDGERT_TEST_PLUGIN_DIR), &error);
  if (!p) throw std::runtime_error("cannot load the " + name + " plugin: " + error.message);
  loaded[name] = p;
  return *p;
}

edgert_tensor view_of(const HostTensor* t, const void* data) {
  edgert_tensor v{};
  if (!t) return v;
  v.dtype = t->dtype;
  v.rank = static_cast<int32_t>(t->dims.size());
  for (size_t i = 0; i < t->dims.size(); ++i) v.dims[i] = t->dims[i];
  v.data = const_cast<void*>(data);
  return v;
}

std::string dims_string(const edgert_tensor& t) {
  std::ostringstream s;
  s << '[';
  for (int i = 0; i < t.rank; ++i) s << (i ? "x" : "") << t.dims[i];
  s << ']';
  return s.str();
}

const edgert_kernel* pick_kernel(const LoadedPlugin& p, const std::string& name, const edgert_node& node,
                                 const std::vector<edgert_tensor>& views) {
  if (!name.empty()) return p.find_kernel(name.c_str());
  for (int32_t i = 0; i < p.table->num_kernels; ++i) {
    const edgert_kernel& k = p.table->kernels[i];
    if (std::string(k.op_type) != node.op_type || std::string(k.domain) != node.domain) continue;
    if (!k.supports || k.supports(&k, &node, views.data())) return &k;
  }
  return nullptr;
}

struct DeviceBuffer {
  void* p = nullptr;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
};

bool is_float_dtype(edgert_dtype d) {
  return d == EDGERT_DTYPE_FLOAT32 || d == EDGERT_DTYPE_FLOAT16 || d == EDGERT_DTYPE_FLOAT64;
}

size_t bytes_of(const edgert_tensor& t) {
  size_t n = 1;
  for (int i = 0; i < t.rank; ++i) n *= static_cast<size_t>(t.dims[i]);
  return n * edgert_dtype_size(t.dtype);
}

HostTensor host_of(const edgert_tensor& t, std::vector<uint8_t> bytes) {
  HostTensor h;
  h.dtype = t.dtype;
  h.dims.assign(t.dims, t.dims + t.rank);
  h.bytes = std::move(bytes);
  return h;
}

std::string index_string(const Dims& dims, int64_t i) {
  std::vector<int64_t> coord(dims.size());
  for (size_t a = dims.size(); a-- > 0;) {
    coord[a] = dims[a] ? i % dims[a] : 0;
    i = dims[a] ? i / dims[a] : 0;
  }
  std::ostringstream s;
  s << '[';
  for (size_t a = 0; a < coord.size(); ++a) s << (a ? "," : "") << coord[a];
  s << ']';
  return s.str();
}

// Expects `got` within tolerance of `ref`, element by element.
void compare(const HostTensor& ref, const HostTensor& got, double atol, double rtol, const std::string& what) {
  if (ref.dims != got.dims) {
    ADD_FAILURE() << what << ": shape differs from the reference";
    return;
  }
  const int64_t n = ref.numel();
  int64_t bad = 0;
  double worst = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < n; ++i) {
    const double r = ref.at(i), g = got.at(i);
    const double err = std::fabs(g - r);
    const bool ok = !std::isnan(g) && !std::isnan(r) && err <= atol + rtol * std::fabs(r);
    if (ok) continue;
    if (bad < 8) first << "\n  at " << index_string(ref.dims, i) << ": expected " << r << ", got " << g;
    if (!(err <= worst)) worst = err;
    ++bad;
  }
  if (bad)
    ADD_FAILURE() << what << ": " << bad << " of " << n << " elements differ (atol " << atol << ", rtol " << rtol
                  << ", largest error " << worst << ")" << first.str();
}

}  // namespace

namespace {

// The values the GPU side of a case reads: float16 where it follows the dtype, replaced by
// gpu_tensor, transposed to channels-last for nhwc cases.
std::vector<HostTensor> gpu_inputs_of(const GpuCase& c) {
  const bool half = c.dtype == EDGERT_DTYPE_FLOAT16;
  std::vector<HostTensor> values;
  for (const CaseInput& in : c.inputs) {
    if (in.absent) {
      values.emplace_back();
      continue;
    }
    const bool replaced = in.gpu_tensor.dtype != EDGERT_DTYPE_UNDEFINED;
    const HostTensor& source = replaced ? in.gpu_tensor : in.tensor;
    const bool follows = in.follows_dtype && source.dtype == EDGERT_DTYPE_FLOAT32;
    HostTensor v = follows && half ? source.converted(EDGERT_DTYPE_FLOAT16) : source;
    if (c.nhwc && !in.keeps_layout && !replaced && v.dims.size() == 4) v = v.nchw_to_nhwc();
    values.push_back(std::move(v));
  }
  return values;
}

NodeSpec cuda_attributes_of(const GpuCase& c) {
  NodeSpec attributes = c.attributes;
  if (c.nhwc) attributes.string("layout", "NHWC");
  return attributes;
}

}  // namespace

double time_cuda_kernel(const GpuCase& c, int iterations) {
  SCOPED_TRACE(c.op_type + " " + c.label);
  const LoadedPlugin* cuda = nullptr;
  try {
    cuda = &plugin("cuda");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    return -1;
  }
  const std::vector<HostTensor> values = gpu_inputs_of(c);
  const NodeSpec attributes = cuda_attributes_of(c);
  const int32_t num_inputs = static_cast<int32_t>(c.inputs.size());
  const edgert_node node{"bench_node", c.domain.c_str(), c.op_type.c_str(), c.opset, num_inputs, c.num_outputs,
                         static_cast<int32_t>(attributes.attributes().size()), attributes.attributes().data()};
  std::vector<edgert_tensor> build_views;
  for (int32_t i = 0; i < num_inputs; ++i)
    build_views.push_back(c.inputs[i].absent ? edgert_tensor{}
                                             : view_of(&values[i], c.inputs[i].constant ? values[i].bytes.data() : nullptr));
  const edgert_kernel* k = pick_kernel(*cuda, c.cuda_kernel, node, build_views);
  if (!k) {
    ADD_FAILURE() << "the cuda plugin has no kernel that supports this node";
    return -1;
  }
  int64_t tactic = 0;
  if (k->tactics) {
    edgert_tactic first{};
    if (k->tactics(k, &node, build_views.data(), &first, 1) > 0) tactic = first.id;
  }
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<edgert_tensor> views;
  for (int32_t i = 0; i < num_inputs; ++i) {
    if (c.inputs[i].absent) {
      views.push_back(edgert_tensor{});
      continue;
    }
    if ((k->host_inputs >> i) & 1u) {
      views.push_back(view_of(&values[i], values[i].bytes.data()));
      continue;
    }
    buffers.push_back(std::make_unique<DeviceBuffer>(values[i].bytes.size()));
    cudaMemcpy(buffers.back()->p, values[i].bytes.data(), values[i].bytes.size(), cudaMemcpyHostToDevice);
    views.push_back(view_of(&values[i], buffers.back()->p));
  }
  std::vector<edgert_tensor> outs(static_cast<size_t>(c.num_outputs));
  void* state = nullptr;
  edgert_prepare_info info{};
  edgert_error error{};
  if (k->prepare(k, &node, tactic, views.data(), outs.data(), &state, &info, &error) != EDGERT_OK) {
    ADD_FAILURE() << "prepare: " << error.message;
    if (state) k->release(k, state);
    return -1;
  }
  for (edgert_tensor& t : outs) {
    buffers.push_back(std::make_unique<DeviceBuffer>(bytes_of(t)));
    t.data = buffers.back()->p;
  }
  DeviceBuffer workspace(info.workspace_bytes);
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  cudaStreamCreate(&stream);
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  edgert_status s = k->execute(k, state, &node, views.data(), outs.data(), workspace.p, stream, &error);
  cudaEventRecord(start, stream);
  for (int i = 0; i < iterations && s == EDGERT_OK; ++i)
    s = k->execute(k, state, &node, views.data(), outs.data(), workspace.p, stream, &error);
  cudaEventRecord(end, stream);
  const cudaError_t synced = cudaEventSynchronize(end);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, end);
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  cudaStreamDestroy(stream);
  k->release(k, state);
  if (s != EDGERT_OK || synced != cudaSuccess) {
    ADD_FAILURE() << "execute: " << (s != EDGERT_OK ? error.message : cudaGetErrorString(synced));
    return -1;
  }
  return 1000.0 * ms / iterations;
}

std::string gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
  }
  if (count == 0) return "cudaGetDeviceCount found no device";
  return "";
}

void GpuTest::SetUp() {
  const std::string why = gpu_unavailable_reason();
  if (!why.empty())
    FAIL() << "no CUDA GPU on this machine: GPU tests run on the GPU machine (tests/gpu/run-on-device) (" << why << ")";
}

void run_case(const GpuCase& c) {
  SCOPED_TRACE(c.label.empty() ? c.op_type : c.op_type + " " + c.label);
  const LoadedPlugin* cpu = nullptr;
  const LoadedPlugin* cuda = nullptr;
  try {
    cpu = &plugin("cpu");
    cuda = &plugin("cuda");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    return;
  }
  const bool half = c.dtype == EDGERT_DTYPE_FLOAT16;

  // The CPU sees float32 (rounded through float16 for float16 cases); the GPU gpu_inputs_of's.
  std::vector<HostTensor> cpu_values;
  for (const CaseInput& in : c.inputs) {
    const bool follows = in.follows_dtype && in.tensor.dtype == EDGERT_DTYPE_FLOAT32;
    cpu_values.push_back(in.absent ? HostTensor{}
                         : follows && half ? in.tensor.converted(EDGERT_DTYPE_FLOAT16).converted(EDGERT_DTYPE_FLOAT32)
                                           : in.tensor);
  }
  const std::vector<HostTensor> gpu_layout_values = gpu_inputs_of(c);
  const int32_t num_inputs = static_cast<int32_t>(c.inputs.size());

  // Nodes: the CUDA one carries the layout.
  const NodeSpec cuda_attributes = cuda_attributes_of(c);
  const char* domain = c.domain.c_str();
  const edgert_node cpu_node{"test_node", domain, c.op_type.c_str(), c.opset, num_inputs, c.num_outputs,
                             static_cast<int32_t>(c.attributes.attributes().size()), c.attributes.attributes().data()};
  const edgert_node cuda_node{"test_node", domain, c.op_type.c_str(), c.opset, num_inputs, c.num_outputs,
                              static_cast<int32_t>(cuda_attributes.attributes().size()),
                              cuda_attributes.attributes().data()};

  // CPU reference
  std::vector<edgert_tensor> cpu_views;
  for (int32_t i = 0; i < num_inputs; ++i)
    cpu_views.push_back(c.inputs[i].absent ? edgert_tensor{} : view_of(&cpu_values[i], cpu_values[i].bytes.data()));
  const edgert_kernel* ck = pick_kernel(*cpu, c.cpu_kernel, cpu_node, cpu_views);
  if (!ck) {
    ADD_FAILURE() << "the cpu plugin has no kernel for this node";
    return;
  }
  std::vector<HostTensor> reference;
  {
    std::vector<edgert_tensor> outs(static_cast<size_t>(c.num_outputs));
    void* state = nullptr;
    edgert_prepare_info info{};
    edgert_error error{};
    edgert_status s = ck->prepare(ck, &cpu_node, 0, cpu_views.data(), outs.data(), &state, &info, &error);
    if (s != EDGERT_OK) {
      ADD_FAILURE() << "cpu " << ck->name << " prepare: " << error.message;
      if (state) ck->release(ck, state);
      return;
    }
    std::vector<std::vector<uint8_t>> storage;
    for (edgert_tensor& t : outs) {
      storage.emplace_back(bytes_of(t) + 1);
      t.data = storage.back().data();
    }
    std::vector<uint8_t> workspace(info.workspace_bytes + 64);
    void* ws = workspace.data() + (64 - reinterpret_cast<uintptr_t>(workspace.data()) % 64) % 64;
    s = ck->execute(ck, state, &cpu_node, cpu_views.data(), outs.data(), ws, nullptr, &error);
    ck->release(ck, state);
    if (s != EDGERT_OK) {
      ADD_FAILURE() << "cpu " << ck->name << " execute: " << error.message;
      return;
    }
    for (size_t o = 0; o < outs.size(); ++o) {
      storage[o].resize(bytes_of(outs[o]));
      reference.push_back(host_of(outs[o], storage[o]));
    }
  }

  // CUDA: what the builder shows it, then every tactic at run time
  std::vector<edgert_tensor> build_views;
  for (int32_t i = 0; i < num_inputs; ++i) {
    const CaseInput& in = c.inputs[i];
    build_views.push_back(in.absent ? edgert_tensor{}
                                    : view_of(&gpu_layout_values[i], in.constant ? gpu_layout_values[i].bytes.data() : nullptr));
  }
  const edgert_kernel* gk = pick_kernel(*cuda, c.cuda_kernel, cuda_node, build_views);
  if (!gk) {
    ADD_FAILURE() << "the cuda plugin has no kernel that supports this node";
    return;
  }
  if (gk->supports) {
    EXPECT_EQ(gk->supports(gk, &cuda_node, build_views.data()), 1) << gk->name << " refuses the node";
  }

  std::vector<edgert_tactic> tactics(64);
  if (gk->tactics) {
    const int32_t n = gk->tactics(gk, &cuda_node, build_views.data(), tactics.data(), static_cast<int32_t>(tactics.size()));
    tactics.resize(static_cast<size_t>(std::min<int32_t>(n, 64)));
  } else {
    tactics = {{0, "default"}};
  }
  EXPECT_FALSE(tactics.empty()) << gk->name << " lists no tactic";

  // Device copies of the inputs (host inputs stay on the host).
  std::vector<std::unique_ptr<DeviceBuffer>> device_inputs;
  std::vector<edgert_tensor> run_views;
  for (int32_t i = 0; i < num_inputs; ++i) {
    const CaseInput& in = c.inputs[i];
    device_inputs.emplace_back();
    if (in.absent) {
      run_views.push_back(edgert_tensor{});
      continue;
    }
    const HostTensor& v = gpu_layout_values[i];
    if ((gk->host_inputs >> i) & 1u) {
      run_views.push_back(view_of(&v, v.bytes.data()));
      continue;
    }
    device_inputs.back() = std::make_unique<DeviceBuffer>(v.bytes.size());
    if (!v.bytes.empty()) {
      EXPECT_EQ(cudaMemcpy(device_inputs.back()->p, v.bytes.data(), v.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
    run_views.push_back(view_of(&v, device_inputs.back()->p));
  }

  for (size_t t = 0; t < tactics.size(); ++t) {
    const edgert_tactic& tactic = tactics[t];
    // The builder marks a tactic that refuses the node failed and times the others; the first
    // listed is what a build without timing takes, so it must run.
    auto refused = [&](edgert_status s, const edgert_error& error) {
      if (s != EDGERT_ERR_UNSUPPORTED || t == 0) return false;
      std::cout << "[ note     ] " << gk->name << " tactic " << tactic.id << " refuses the node: " << error.message
                << "\n";
      return true;
    };
    SCOPED_TRACE(std::string("cuda kernel ") + gk->name + " tactic " + std::to_string(tactic.id) + " (" +
                 (tactic.name ? tactic.name : "") + ")");
    std::vector<edgert_tensor> outs(static_cast<size_t>(c.num_outputs));
    edgert_error error{};

    // Build time: constants on the host, activations unknown.
    {
      std::vector<edgert_tensor> build_outs(static_cast<size_t>(c.num_outputs));
      void* state = nullptr;
      edgert_prepare_info info{};
      const edgert_status s =
          gk->prepare(gk, &cuda_node, tactic.id, build_views.data(), build_outs.data(), &state, &info, &error);
      if (state) gk->release(gk, state);
      if (s != EDGERT_OK && s != EDGERT_ERR_NEEDS_DATA) {
        if (!refused(s, error)) ADD_FAILURE() << "build-time prepare: " << error.message;
        continue;
      }
      if (s == EDGERT_OK) outs = build_outs;  // compared with the run's below
    }
    const std::vector<edgert_tensor> build_outs = outs;

    void* state = nullptr;
    edgert_prepare_info info{};
    edgert_status s = gk->prepare(gk, &cuda_node, tactic.id, run_views.data(), outs.data(), &state, &info, &error);
    if (s != EDGERT_OK) {
      if (!refused(s, error)) ADD_FAILURE() << "prepare: " << error.message;
      if (state) gk->release(gk, state);
      continue;
    }
    for (size_t o = 0; o < outs.size(); ++o) {
      if (build_outs[o].dtype == EDGERT_DTYPE_UNDEFINED) continue;  // build time needed data
      EXPECT_EQ(build_outs[o].dtype, outs[o].dtype) << "output " << o << ": build-time dtype";
      EXPECT_EQ(dims_string(build_outs[o]), dims_string(outs[o])) << "output " << o << ": build-time shape";
    }
    std::vector<std::unique_ptr<DeviceBuffer>> device_outputs;
    for (size_t o = 0; o < outs.size(); ++o) {
      if (o == 0 && c.in_place) {
        if (bytes_of(outs[0]) != gpu_layout_values[0].bytes.size())
          ADD_FAILURE() << "in-place case whose output size differs from input 0's";
        outs[0].data = run_views[0].data;
        device_outputs.emplace_back();
        continue;
      }
      const size_t bytes = bytes_of(outs[o]);
      device_outputs.push_back(std::make_unique<DeviceBuffer>(bytes));
      // Poison: all-ones bytes are NaN in float32 and float16; 0x5A is no value the tests expect.
      EXPECT_EQ(cudaMemset(device_outputs.back()->p, is_float_dtype(outs[o].dtype) ? 0xff : 0x5a, bytes ? bytes : 1),
                cudaSuccess);
      outs[o].data = device_outputs.back()->p;
    }
    std::unique_ptr<DeviceBuffer> workspace;
    if (info.workspace_bytes) workspace = std::make_unique<DeviceBuffer>(info.workspace_bytes);
    cudaStream_t stream = nullptr;
    EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    s = gk->execute(gk, state, &cuda_node, run_views.data(), outs.data(), workspace ? workspace->p : nullptr, stream,
                    &error);
    const cudaError_t synced = cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
    gk->release(gk, state);
    if (s != EDGERT_OK) {
      ADD_FAILURE() << "execute: " << error.message;
      continue;
    }
    if (synced != cudaSuccess) {
      ADD_FAILURE() << "the kernel failed on the device: " << cudaGetErrorString(synced);
      continue;
    }
    if (static_cast<int32_t>(reference.size()) != c.num_outputs) continue;
    for (size_t o = 0; o < outs.size(); ++o) {
      std::vector<uint8_t> bytes(bytes_of(outs[o]));
      if (!bytes.empty()) {
        EXPECT_EQ(cudaMemcpy(bytes.data(), outs[o].data, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      }
      HostTensor got = host_of(outs[o], std::move(bytes));
      if (c.nhwc && got.dims.size() == 4) got = got.nhwc_to_nchw();
      const bool floats = is_float_dtype(got.dtype) || is_float_dtype(reference[o].dtype);
      const bool half_output = got.dtype == EDGERT_DTYPE_FLOAT16 || reference[o].dtype == EDGERT_DTYPE_FLOAT16;
      double atol = 0, rtol = 0;
      if (floats && half_output) {
        atol = c.half_atol >= 0 ? c.half_atol : 1e-3;
        rtol = c.half_rtol >= 0 ? c.half_rtol : 1e-2;
      } else if (floats) {
        atol = c.atol >= 0 ? c.atol : 1e-5;
        rtol = c.rtol >= 0 ? c.rtol : 1e-5;
      }
      compare(reference[o], got, atol, rtol, "output " + std::to_string(o));
    }
  }
}

GpuCase make_case(const std::string& op, std::vector<CaseInput> inputs, NodeSpec attributes, int32_t opset) {
  GpuCase c;
  c.op_type = op;
  c.inputs = std::move(inputs);
  c.attributes = std::move(attributes);
  c.opset = opset;
  return c;
}

void run_float32_and_float16(GpuCase c) {
  for (edgert_dtype dtype : {EDGERT_DTYPE_FLOAT32, EDGERT_DTYPE_FLOAT16}) {
    c.dtype = dtype;
    run_case(c);
  }
}

}  // namespace edgert::gpu_test

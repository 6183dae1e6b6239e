#include "array_tensors.h"

#include <cstdio>
#include <cstring>
#include <utility>

#include <dlpack/dlpack.h>

#include "edgert/dtype_info.h"
#include "edgert/edgert.hpp"

namespace py = pybind11;

namespace edgert::python {
namespace {

struct DtypeMatch {
  edgert_dtype dtype;
  char kind;   // NumPy's dtype.kind
  int bytes;
  const char* name;
};

constexpr DtypeMatch kDtypes[] = {
    {EDGERT_DTYPE_FLOAT32, 'f', 4, "float32"}, {EDGERT_DTYPE_FLOAT16, 'f', 2, "float16"},
    {EDGERT_DTYPE_FLOAT64, 'f', 8, "float64"}, {EDGERT_DTYPE_INT8, 'i', 1, "int8"},
    {EDGERT_DTYPE_INT16, 'i', 2, "int16"},     {EDGERT_DTYPE_INT32, 'i', 4, "int32"},
    {EDGERT_DTYPE_INT64, 'i', 8, "int64"},     {EDGERT_DTYPE_UINT8, 'u', 1, "uint8"},
    {EDGERT_DTYPE_UINT16, 'u', 2, "uint16"},   {EDGERT_DTYPE_UINT32, 'u', 4, "uint32"},
    {EDGERT_DTYPE_UINT64, 'u', 8, "uint64"},   {EDGERT_DTYPE_BOOL, 'b', 1, "bool"},
};

edgert_dtype from_kind(char kind, int bytes, const std::string& what, const std::string& spelled) {
  for (const DtypeMatch& m : kDtypes)
    if (m.kind == kind && m.bytes == bytes) return m.dtype;
  fail(EDGERT_ERR_SHAPE, what + ": dtype " + spelled + " has no edgert equivalent");
}

// DLPack 0.8's kDLBool, which the 0.6 header Debian 12 ships lacks (NumPy and torch send it).
constexpr uint8_t kDLPackBool = 6;

// DLPack's type codes as NumPy's kinds.
char dlpack_kind(uint8_t code) {
  switch (code) {
    case kDLFloat: return 'f';
    case kDLInt: return 'i';
    case kDLUInt: return 'u';
    case kDLPackBool: return 'b';
    default: return '?';
  }
}

void check_rank(int64_t rank, const std::string& what) {
  if (rank > EDGERT_MAX_RANK)
    fail(EDGERT_ERR_SHAPE, what + ": " + std::to_string(rank) + " dimensions; edgert tensors have at most " +
                               std::to_string(EDGERT_MAX_RANK));
}

}  // namespace

void fail(edgert_status status, const std::string& message) {
  edgert_error error{};
  error.status = status;
  std::snprintf(error.message, sizeof error.message, "%s", message.c_str());
  throw Error(error);
}

TensorView::TensorView(TensorView&& other) noexcept { *this = std::move(other); }

TensorView& TensorView::operator=(TensorView&& other) noexcept {
  std::swap(tensor_, other.tensor_);
  std::swap(space_, other.space_);
  std::swap(owner_, other.owner_);
  std::swap(managed_, other.managed_);
  return *this;
}

TensorView::~TensorView() {
  if (auto* managed = static_cast<DLManagedTensor*>(managed_); managed && managed->deleter) managed->deleter(managed);
}

size_t TensorView::bytes() const {
  size_t count = 1;
  for (int32_t i = 0; i < tensor_.rank; ++i) count *= static_cast<size_t>(tensor_.dims[i]);
  return count * edgert_dtype_size(tensor_.dtype);
}

bool TensorView::on_cuda_device(const py::handle& value) {
  if (py::isinstance<py::array>(value) || !py::hasattr(value, "__dlpack_device__")) return false;
  const py::tuple device = value.attr("__dlpack_device__")();
  const int type = device[0].cast<int>();
  return type == kDLCUDA || type == kDLCUDAManaged;
}

TensorView TensorView::from_object(const py::handle& value, const std::string& what, intptr_t stream) {
  TensorView view;
  if (py::isinstance<py::array>(value) || !py::hasattr(value, "__dlpack__")) {
    // NumPy first (it also has __dlpack__, but reading it directly keeps non-contiguous arrays
    // and Python lists working): one copy only when the array is not row-major already.
    py::array array = py::array::ensure(value, py::array::c_style);
    if (!array) fail(EDGERT_ERR_SHAPE, what + ": not an array (a NumPy array or an object with __dlpack__)");
    check_rank(array.ndim(), what);
    // The dtype's kind and size through Python attributes: pybind11 2.10 reads them from the
    // descriptor struct, whose layout NumPy 2 changed (a module built here runs with either).
    const py::object dtype = array.attr("dtype");
    view.tensor_.dtype = from_kind(py::str(dtype.attr("kind")).cast<std::string>()[0], dtype.attr("itemsize").cast<int>(),
                                   what, py::str(dtype).cast<std::string>());
    view.tensor_.rank = static_cast<int32_t>(array.ndim());
    for (py::ssize_t i = 0; i < array.ndim(); ++i) view.tensor_.dims[i] = array.shape(i);
    view.tensor_.data = const_cast<void*>(array.data());
    view.owner_ = std::move(array);
    return view;
  }
  // Host exporters (NumPy) refuse a stream; a device one takes it (DLPack's consumer protocol).
  py::capsule capsule = on_cuda_device(value) && stream != 0 ? value.attr("__dlpack__")(py::arg("stream") = stream)
                                                             : value.attr("__dlpack__")();
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed) throw py::error_already_set();
  // The capsule is consumed: renamed so its own destructor leaves the tensor to us.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  view.managed_ = managed;
  view.owner_ = py::reinterpret_borrow<py::object>(value);
  const DLTensor& t = managed->dl_tensor;
  check_rank(t.ndim, what);
  if (t.dtype.lanes != 1) fail(EDGERT_ERR_SHAPE, what + ": vector (lanes > 1) DLPack tensors are not supported");
  view.tensor_.dtype = from_kind(dlpack_kind(t.dtype.code), t.dtype.bits / 8, what,
                                 "DLPack code " + std::to_string(t.dtype.code) + " bits " + std::to_string(t.dtype.bits));
  if (t.dtype.code == kDLPackBool && t.dtype.bits != 8) fail(EDGERT_ERR_SHAPE, what + ": DLPack bools must be 8-bit");
  view.tensor_.rank = t.ndim;
  int64_t expected_stride = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    view.tensor_.dims[i] = t.shape[i];
    if (t.strides && t.shape[i] != 1 && t.strides[i] != expected_stride)
      fail(EDGERT_ERR_SHAPE, what + ": DLPack tensor is not row-major (dimension " + std::to_string(i) +
                                 " has stride " + std::to_string(t.strides[i]) + ", expected " +
                                 std::to_string(expected_stride) + "); make it contiguous first");
    expected_stride *= t.shape[i];
  }
  view.tensor_.data = static_cast<char*>(t.data) + t.byte_offset;
  switch (t.device.device_type) {
    case kDLCPU: case kDLCUDAHost: view.space_ = EDGERT_MEMORY_HOST; break;
    case kDLCUDA: view.space_ = EDGERT_MEMORY_DEVICE; break;
    case kDLCUDAManaged: view.space_ = EDGERT_MEMORY_UNIFIED; break;
    default:
      fail(EDGERT_ERR_SHAPE, what + ": DLPack device type " + std::to_string(t.device.device_type) +
                                 " is neither the CPU nor a CUDA device");
  }
  return view;
}

std::string dtype_name(edgert_dtype dtype) {
  for (const DtypeMatch& m : kDtypes)
    if (m.dtype == dtype) return m.name;
  return edgert_dtype_name(dtype);
}

py::array copy_to_numpy(const edgert_tensor& tensor) {
  // numpy.empty, not pybind11's array constructor: that one derives strides from the descriptor
  // struct, whose layout NumPy 2 changed (every stride came out 0 there).
  py::tuple shape(tensor.rank);
  size_t bytes = edgert_dtype_size(tensor.dtype);
  for (int32_t i = 0; i < tensor.rank; ++i) {
    shape[i] = py::int_(tensor.dims[i]);
    bytes *= static_cast<size_t>(tensor.dims[i]);
  }
  py::array array = py::module_::import("numpy").attr("empty")(shape, py::str(dtype_name(tensor.dtype)));
  if (bytes > 0) std::memcpy(array.mutable_data(), tensor.data, bytes);
  return array;
}

}  // namespace edgert::python

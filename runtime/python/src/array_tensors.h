// Python arrays as edgert tensors and back: NumPy arrays and any object with __dlpack__ (torch,
// CuPy, JAX) are read in place, never copied, when they are dense and row-major.
#pragma once

#include <cstdint>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "edgert/edgert.h"

namespace edgert::python {

// A borrowed view of a Python array as an edgert_tensor. Holds the array (and, for DLPack, the
// exporter's managed tensor, given back on destruction) as long as the view lives.
class TensorView {
 public:
  TensorView() = default;
  TensorView(TensorView&&) noexcept;
  TensorView& operator=(TensorView&&) noexcept;
  TensorView(const TensorView&) = delete;
  ~TensorView();

  // `what` names the tensor in messages ("input 'x'"). Throws edgert::Error (EDGERT_ERR_SHAPE)
  // for a dtype edgert has no name for, strides that are not row-major, or more than
  // EDGERT_MAX_RANK dimensions. A NumPy array that is not C-contiguous is copied once.
  // `stream`: the CUDA stream the tensor will be used on, passed to a device tensor's
  // __dlpack__ so that its producer orders its pending writes before that stream's work.
  static TensorView from_object(const pybind11::handle& value, const std::string& what, intptr_t stream = 0);
  // Whether `value` is a DLPack tensor in CUDA device or managed memory (__dlpack_device__).
  static bool on_cuda_device(const pybind11::handle& value);

  const edgert_tensor& tensor() const { return tensor_; }
  edgert_memory_space space() const { return space_; }
  size_t bytes() const;

 private:
  edgert_tensor tensor_{};
  edgert_memory_space space_ = EDGERT_MEMORY_HOST;
  pybind11::object owner_;
  void* managed_ = nullptr;  // DLManagedTensor*, released with its deleter
};

// "float32", "int64", ... as ONNX Runtime and NumPy spell them.
std::string dtype_name(edgert_dtype dtype);

// A copy of a host tensor the context owns, as a new NumPy array.
pybind11::array copy_to_numpy(const edgert_tensor& tensor);

// Throws edgert::Error with `status` and the message: the Python package turns it into
// edgert.EdgertError.
[[noreturn]] void fail(edgert_status status, const std::string& message);

}  // namespace edgert::python

// edgert._edgert: the Python binding over the C APIs of libedgert (edgert.h: load and run
// engines) and libedgert-builder (builder.h: build them). The package's edgert/__init__.py puts
// the Pythonic surface on top; this file only crosses the boundary.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "array_tensors.h"
#include "edgert/builder.hpp"
#include "edgert/edgert.hpp"

namespace py = pybind11;

namespace edgert::python {
namespace {

py::dict tensor_info_dict(const edgert_tensor_info& info) {
  py::list shape, dim_names;
  for (int32_t i = 0; i < info.rank; ++i) {
    shape.append(info.dims[i] < 0 ? py::object(py::none()) : py::object(py::int_(info.dims[i])));
    dim_names.append(info.dim_names[i] ? py::object(py::str(info.dim_names[i])) : py::object(py::none()));
  }
  py::dict d;
  d["name"] = info.name;
  d["dtype"] = dtype_name(info.dtype);
  d["shape"] = shape;
  d["dim_names"] = dim_names;
  return d;
}

class EngineBinding {
 public:
  EngineBinding(const std::string& path, const std::string& plugin_path, int32_t num_threads, bool allow_board_mismatch) {
    edgert_load_options options;
    edgert_load_options_init(&options);
    options.plugin_path = plugin_path.empty() ? nullptr : plugin_path.c_str();
    options.num_threads = num_threads;
    options.allow_board_mismatch = allow_board_mismatch ? 1 : 0;
    py::gil_scoped_release unlocked;
    engine_ = std::make_shared<Engine>(path, &options);
  }
  py::list inputs() const {
    py::list list;
    for (int32_t i = 0; i < engine_->num_inputs(); ++i) list.append(tensor_info_dict(engine_->input_info(i)));
    return list;
  }
  py::list outputs() const {
    py::list list;
    for (int32_t i = 0; i < engine_->num_outputs(); ++i) list.append(tensor_info_dict(engine_->output_info(i)));
    return list;
  }
  std::string board() const { return edgert_engine_board(engine_->get()); }
  const std::shared_ptr<Engine>& engine() const { return engine_; }

 private:
  std::shared_ptr<Engine> engine_;
};

class ContextBinding {
 public:
  explicit ContextBinding(const EngineBinding& engine)
      : engine_(engine.engine()), context_(*engine_), engine_has_device_(has_device(*engine_)) {}

  // Inputs by name, read in place. With `outputs` (name -> array), those outputs are written into
  // the given arrays (host, or device memory through DLPack) and returned as given; the others
  // come back as new NumPy arrays. Device tensors run on `stream` (a CUDA stream handle; None:
  // the legacy default stream, where torch and CuPy work unless told otherwise), and the run has
  // finished when this returns.
  py::dict run(const py::dict& feed, const py::object& outputs, const py::object& stream) {
    const int32_t num_inputs = engine_->num_inputs(), num_outputs = engine_->num_outputs();
    std::vector<std::string> names;
    for (int32_t i = 0; i < num_inputs; ++i) names.push_back(engine_->input_info(i).name);
    for (const auto& item : feed) {
      const std::string name = py::str(item.first);
      if (std::find(names.begin(), names.end(), name) == names.end())
        fail(EDGERT_ERR_INVALID_ARGUMENT, "the feed names '" + name + "', which is not an input of the engine (its "
                                          "inputs: " + join(names) + ")");
    }
    for (const std::string& name : names)
      if (!feed.contains(name))
        fail(EDGERT_ERR_INVALID_ARGUMENT, "input '" + name + "' is missing from the feed (the engine's inputs: " +
                                              join(names) + ")");
    py::dict given = outputs.is_none() ? py::dict() : outputs.cast<py::dict>();
    // Bound outputs and device inputs take the binding path (bind, enqueue, synchronize).
    bool device = given.size() > 0;
    for (const std::string& name : names) device |= TensorView::on_cuda_device(feed[py::str(name)]);
    const intptr_t stream_handle = !device ? 0 : stream.is_none() ? kLegacyDefaultStream : stream.cast<intptr_t>();
    std::vector<TensorView> views;
    for (const std::string& name : names)
      views.push_back(TensorView::from_object(feed[py::str(name)], "input '" + name + "'", stream_handle));
    std::vector<TensorView> bound(num_outputs);
    std::vector<bool> is_bound(num_outputs, false);
    for (int32_t i = 0; i < num_outputs; ++i) {
      const std::string name = engine_->output_info(i).name;
      if (!given.contains(name)) continue;
      bound[i] = TensorView::from_object(given[py::str(name)], "output '" + name + "'", stream_handle);
      is_bound[i] = true;
    }
    {
      py::gil_scoped_release unlocked;
      if (!device) {
        std::vector<edgert_tensor> tensors;
        for (const TensorView& v : views) tensors.push_back(v.tensor());
        context_.run(tensors);
      } else {
        for (int32_t i = 0; i < num_inputs; ++i) context_.bind_input(i, views[i].tensor(), views[i].space());
        for (int32_t i = 0; i < num_outputs; ++i)
          context_.bind_output(i, is_bound[i] ? bound[i].tensor().data : nullptr, is_bound[i] ? bound[i].bytes() : 0,
                               is_bound[i] ? bound[i].space() : EDGERT_MEMORY_HOST);
        // A graph cannot be captured on the legacy default stream: runs there launch directly.
        edgert_context_set_cuda_graphs(context_.get(), stream_handle != kLegacyDefaultStream);
        context_.enqueue(reinterpret_cast<void*>(stream_handle));
        context_.synchronize();
      }
    }
    py::dict result;
    for (int32_t i = 0; i < num_outputs; ++i) {
      const std::string name = engine_->output_info(i).name;
      if (is_bound[i]) {
        result[py::str(name)] = given[py::str(name)];
        continue;
      }
      if (device && engine_has_device_)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "output '" + name + "' stayed in device memory: pass it in `outputs` (a "
                                          "device array through DLPack) when the inputs are device arrays");
      result[py::str(name)] = copy_to_numpy(context_.output(i));
    }
    return result;
  }

 private:
  // CUDA's cudaStreamLegacy, as DLPack and CUDA spell the legacy default stream.
  static constexpr intptr_t kLegacyDefaultStream = 1;

  static std::string join(const std::vector<std::string>& names) {
    std::string text;
    for (size_t i = 0; i < names.size(); ++i) text += (i ? ", '" : "'") + names[i] + "'";
    return text.empty() ? "none" : text;
  }
  // After an enqueue an unbound output of an engine with a device lives in the device's own
  // memory, which host code cannot read; a host engine's outputs are host memory. The device
  // allocator answers which kind this engine is.
  static bool has_device(const Engine& engine) {
    void* probe = nullptr;
    edgert_error error{};
    if (edgert_engine_allocate(engine.get(), EDGERT_MEMORY_DEVICE, 1, &probe, &error) != EDGERT_OK) return false;
    edgert_engine_free(engine.get(), EDGERT_MEMORY_DEVICE, probe);
    return true;
  }

  std::shared_ptr<Engine> engine_;
  Context context_;
  bool engine_has_device_;
};

class BuilderBinding {
 public:
  explicit BuilderBinding(const std::string& model) : builder_(model) {}
  void set(const std::string& name, const std::string& value) { builder_.set(name, value); }
  // An iterable of feeds: each a dict of input name -> array, or one array for a model with one
  // input. Iterated once, during build().
  void set_calibration(const py::object& samples) {
    if (samples.is_none()) {
      builder_.calibrate_with(nullptr);
      return;
    }
    samples_ = samples;
    builder_.calibrate_with([this](int64_t index, CalibrationFeed& feed) {
      py::gil_scoped_acquire locked;
      if (index == 0) iterator_ = py::iter(samples_);
      if (iterator_ == py::iterator::sentinel()) return false;
      py::object sample = py::reinterpret_borrow<py::object>(*iterator_);
      ++iterator_;
      const auto add = [&](const std::string& name, const py::handle& value) {
        TensorView view = TensorView::from_object(value, "calibration sample " + std::to_string(index) +
                                                             (name.empty() ? "" : " input '" + name + "'"));
        if (view.space() != EDGERT_MEMORY_HOST)
          fail(EDGERT_ERR_INVALID_ARGUMENT, "calibration sample " + std::to_string(index) + ": host arrays only");
        const edgert_tensor& t = view.tensor();
        feed.add(name, t.dtype, std::vector<int64_t>(t.dims, t.dims + t.rank), t.data, view.bytes());
      };
      if (py::isinstance<py::dict>(sample))
        for (const auto& item : sample.cast<py::dict>()) add(py::str(item.first), item.second);
      else
        add("", sample);
      return true;
    });
  }
  void set_log(const py::object& log) {
    log_ = log;
    if (log.is_none()) {
      builder_.log_to(nullptr);
      return;
    }
    builder_.log_to([this](const std::string& line) {
      py::gil_scoped_acquire locked;
      log_(line);
    });
  }
  std::shared_ptr<BuiltEngine> build() {
    iterator_ = py::iterator();
    py::gil_scoped_release unlocked;
    return std::make_shared<BuiltEngine>(builder_.build());
  }

 private:
  Builder builder_;
  py::object samples_, log_;
  py::iterator iterator_;
};

// Python's spelling of a status: the enumerator's name without EDGERT_ERR_, in lower case.
const char* status_name(edgert_status status) {
  switch (status) {
    case EDGERT_OK: return "ok";
    case EDGERT_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case EDGERT_ERR_UNSUPPORTED: return "unsupported";
    case EDGERT_ERR_OUT_OF_MEMORY: return "out_of_memory";
    case EDGERT_ERR_IO: return "io";
    case EDGERT_ERR_FORMAT: return "format";
    case EDGERT_ERR_CHECKSUM: return "checksum";
    case EDGERT_ERR_VERSION: return "version";
    case EDGERT_ERR_BOARD: return "board";
    case EDGERT_ERR_PLUGIN: return "plugin";
    case EDGERT_ERR_SHAPE: return "shape";
    case EDGERT_ERR_NEEDS_DATA: return "needs_data";
    default: return "internal";
  }
}

}  // namespace
}  // namespace edgert::python

PYBIND11_MODULE(_edgert, m) {
  using namespace edgert::python;
  m.doc() = "edgert's C APIs (libedgert, libedgert-builder); use the edgert package, not this module";
  // Errors reach Python as edgert.EdgertError(message, status): the package defines the class.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const edgert::Error& e) {
      py::object error_class = py::module_::import("edgert").attr("EdgertError");
      PyErr_SetObject(error_class.ptr(), py::make_tuple(e.what(), status_name(e.status())).ptr());
    }
  });
  m.def("version", [] { return std::string(edgert_version()); });
  m.def("inspect_engine_file", [](const std::string& path) { return edgert::inspect_engine_file(path); });

  py::class_<EngineBinding, std::shared_ptr<EngineBinding>>(m, "Engine")
      .def(py::init<const std::string&, const std::string&, int32_t, bool>(), py::arg("path"),
           py::arg("plugin_path") = "", py::arg("num_threads") = 0, py::arg("allow_board_mismatch") = false)
      .def_property_readonly("inputs", &EngineBinding::inputs)
      .def_property_readonly("outputs", &EngineBinding::outputs)
      .def_property_readonly("board", &EngineBinding::board);
  py::class_<ContextBinding>(m, "Context")
      .def(py::init<const EngineBinding&>(), py::keep_alive<1, 2>())
      .def("run", &ContextBinding::run, py::arg("feed"), py::arg("outputs") = py::none(),
           py::arg("stream") = py::none());
  py::class_<edgert::BuiltEngine, std::shared_ptr<edgert::BuiltEngine>>(m, "BuiltEngine")
      .def_property_readonly("data", [](const edgert::BuiltEngine& e) {
        return py::bytes(reinterpret_cast<const char*>(e.data()), e.size());
      })
      .def_property_readonly("report", &edgert::BuiltEngine::report)
      .def("save", &edgert::BuiltEngine::save, py::arg("path"));
  py::class_<BuilderBinding>(m, "Builder")
      .def(py::init<const std::string&>(), py::arg("model"))
      .def("set", &BuilderBinding::set, py::arg("name"), py::arg("value"))
      .def("set_calibration", &BuilderBinding::set_calibration, py::arg("samples"))
      .def("set_log", &BuilderBinding::set_log, py::arg("log"))
      .def("build", &BuilderBinding::build);
}

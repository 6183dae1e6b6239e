#include "onnx_import.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_error.h"
#include "contained_file.h"
#include "edgert/narrow_types.h"
#include "onnx_schema_check.h"
#include "value_kinds.h"
#include "error.h"

namespace edgert::builder {
namespace {

// Protobuf caps a message at 2 GiB; larger models keep their weights as external data.
constexpr int kMaxModelBytes = INT32_MAX;

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

template <typename Src, typename Dst>
void append_converted(const Src& field, std::vector<uint8_t>& bytes) {
  size_t offset = bytes.size();
  bytes.resize(offset + field.size() * sizeof(Dst));
  for (int i = 0; i < field.size(); ++i) {
    Dst v = static_cast<Dst>(field.Get(i));
    std::memcpy(bytes.data() + offset + i * sizeof(Dst), &v, sizeof(Dst));
  }
}

int64_t external_number(const std::string& text, const char* key, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < 0)
    build_fail(EDGERT_ERR_FORMAT, "%s: external data %s '%s' is not a byte count", what.c_str(), key, text.c_str());
  return v;
}

// The file is opened through ReadOnlyFile::open_inside (contained_file.h): a model names its
// weights, and the engine would carry whatever file it named, so `location` may only reach
// regular files inside the model's folder.
std::vector<uint8_t> read_external(const onnx::TensorProto& proto, const std::string& what, const std::string& model_dir,
                                   uint64_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = external_number(kv.value(), "offset", what);
    else if (kv.key() == "length") length = external_number(kv.value(), "length", what);
  }
  ReadOnlyFile file;
  std::string why;
  if (!file.open_inside(model_dir, location, &why))
    build_fail(EDGERT_ERR_FORMAT, "%s: external data location '%s' %s (model folder '%s')", what.c_str(),
               location.c_str(), why.c_str(), model_dir.c_str());
  const int64_t size = static_cast<int64_t>(file.size());
  if (length < 0) length = size - offset;
  if (offset > size || length > size - offset)
    build_fail(EDGERT_ERR_FORMAT, "%s: external data range [%lld, +%lld) lies outside '%s' (%lld bytes)", what.c_str(),
               static_cast<long long>(offset), static_cast<long long>(length), location.c_str(),
               static_cast<long long>(size));
  // Checked before allocating: a length the shape does not need is refused, not read.
  if (static_cast<uint64_t>(length) != expected)
    build_fail(EDGERT_ERR_FORMAT, "%s: shape needs %llu bytes, external data '%s' gives %lld", what.c_str(),
               static_cast<unsigned long long>(expected), location.c_str(), static_cast<long long>(length));
  std::vector<uint8_t> bytes(static_cast<size_t>(length));
  if (!file.read_at(static_cast<uint64_t>(offset), bytes.data(), bytes.size(), &why))
    build_fail(EDGERT_ERR_IO, "%s: cannot read external data '%s': %s", what.c_str(), location.c_str(), why.c_str());
  return bytes;
}

// `what` names the tensor in errors. ONNX makes a dimension dynamic by leaving dim_value unset
// (or giving dim_param); a negative dim_value is invalid. Some exporters still write -1 for
// "dynamic", which is taken as such; any other negative value is refused rather than silently
// made dynamic.
std::vector<Dim> dims_from_type(const onnx::TypeProto_Tensor& type, bool* rank_known, const std::string& what) {
  std::vector<Dim> dims;
  *rank_known = type.has_shape();
  if (!type.has_shape()) return dims;
  for (const auto& d : type.shape().dim()) {
    Dim dim;
    if (d.has_dim_value() && d.dim_value() < -1)
      build_fail(EDGERT_ERR_FORMAT, "%s: dimension %zu is %lld; a dimension is a size >= 0, or dynamic (no "
                 "dim_value, or a dim_param name)", what.c_str(), dims.size(), static_cast<long long>(d.dim_value()));
    if (d.has_dim_value() && d.dim_value() >= 0) dim.value = d.dim_value();
    else if (d.has_dim_param()) dim.name = d.dim_param();
    dims.push_back(dim);
  }
  return dims;
}

// A value's kind, element dtype and shape from its ONNX type: a tensor, a sequence of tensors, or
// an optional of either. Maps and nested sequences are refused.
void read_value_type(const onnx::TypeProto& type, Value& v, const std::string& what) {
  const onnx::TypeProto* t = &type;
  bool optional = false;
  if (t->has_optional_type()) {
    optional = true;
    t = &t->optional_type().elem_type();
  }
  bool sequence = false;
  if (t->has_sequence_type()) {
    sequence = true;
    t = &t->sequence_type().elem_type();
  }
  if (!t->has_tensor_type())
    build_fail(EDGERT_ERR_UNSUPPORTED, "%s is %s, which edgert does not support (tensors, sequences of tensors and "
               "optionals of either are)", what.c_str(), t->has_map_type() ? "a map" : t->has_sequence_type() ?
               "a sequence of sequences" : "of no type edgert knows");
  v.kind = sequence ? (optional ? ValueKind::OptionalSequence : ValueKind::Sequence)
                    : (optional ? ValueKind::OptionalTensor : ValueKind::Tensor);
  v.dtype = t->tensor_type().elem_type();
  // A sequence's tensors may differ in shape: the declared shape is of one element, not kept.
  bool rank_known = false;
  std::vector<Dim> dims = dims_from_type(t->tensor_type(), &rank_known, what);
  if (!sequence) {
    v.shape = std::move(dims);
    v.rank_known = rank_known;
  }
}

class GraphImporter {
 public:
  GraphImporter(Model& model, const std::string& model_dir, int32_t default_opset)
      : model_(model), model_dir_(model_dir), opset_(default_opset) {}

  // Imports `proto` as model_.graphs[index]. `outer` lists names visible from enclosing graphs;
  // a subgraph reading one of them gets a value of that name with no producer (captured).
  void import(const onnx::GraphProto& proto, size_t index, const std::set<std::string>& outer) {
    Graph graph;
    graph.name = proto.name();
    std::unordered_map<std::string, int32_t> by_name;
    auto define = [&](Value v) {
      std::string name = v.name;
      int32_t id = graph.add_value(std::move(v));
      by_name[name] = id;
      return id;
    };

    for (const auto& init : proto.initializer())
      define(tensor_from_proto(init, "initializer '" + init.name() + "'", model_dir_));
    for (const auto& sparse : proto.sparse_initializer())
      build_fail(EDGERT_ERR_UNSUPPORTED, "sparse initializer '%s' is not supported; densify it before building",
                 sparse.values().name().c_str());
    for (const auto& input : proto.input()) {
      if (by_name.count(input.name())) continue;  // IR < 4: initializers are listed as inputs too
      // Subgraph inputs (Loop/Scan bodies) may leave their type to inference.
      bool untyped_subgraph_input = index != 0 && input.type().value_case() == onnx::TypeProto::VALUE_NOT_SET;
      Value v;
      v.name = input.name();
      if (!untyped_subgraph_input) read_value_type(input.type(), v, "graph input '" + v.name + "'");
      graph.inputs.push_back(define(std::move(v)));
    }
    std::unordered_map<std::string, const onnx::ValueInfoProto*> declared;
    for (const auto& vi : proto.value_info()) declared[vi.name()] = &vi;
    for (const auto& vi : proto.output()) declared[vi.name()] = &vi;

    std::set<std::string> visible = outer;
    for (const auto& [name, id] : by_name) visible.insert(name);

    for (int n = 0; n < proto.node_size(); ++n) {
      const onnx::NodeProto& np = proto.node(n);
      std::string label = np.name().empty() ? np.op_type() + "_" + std::to_string(n) : np.name();
      bool default_domain = np.domain().empty() || np.domain() == "ai.onnx";
      const std::string domain = default_domain ? "" : np.domain();
      auto imported = model_.opsets.find(domain);
      const int64_t opset = imported != model_.opsets.end() ? imported->second : opset_;
      if (default_domain && opset == 0)
        build_fail(EDGERT_ERR_FORMAT, "node '%s' (%s) is of the default ONNX domain, which the model does not import",
                   label.c_str(), np.op_type().c_str());
      check_node_arity(np, domain, opset, label);
      if (default_domain && np.op_type() == "Constant") {
        if (np.output_size() != 1) build_fail(EDGERT_ERR_FORMAT, "Constant node '%s' must have one output", label.c_str());
        Value v = constant_value(np, label);
        v.name = np.output(0);
        define(std::move(v));
        visible.insert(np.output(0));
        continue;
      }
      Node node;
      node.name = label;
      node.domain = domain;
      node.op_type = np.op_type();
      node.opset = static_cast<int32_t>(opset);
      for (const std::string& in : np.input()) {
        if (in.empty()) {
          node.inputs.push_back(-1);
          continue;
        }
        auto found = by_name.find(in);
        if (found == by_name.end()) {
          if (!outer.count(in))
            build_fail(EDGERT_ERR_FORMAT, "node '%s' (%s) reads '%s', which no earlier node, initializer or graph "
                       "input defines (the graph is not topologically sorted or is incomplete)",
                       label.c_str(), np.op_type().c_str(), in.c_str());
          Value captured;
          captured.name = in;
          found = by_name.emplace(in, graph.add_value(std::move(captured))).first;
          captured_names_.push_back(in);
        }
        node.inputs.push_back(found->second);
      }
      for (const std::string& out : np.output()) {
        Value v;
        v.name = out.empty() ? label + ":unused" + std::to_string(node.outputs.size()) : out;
        if (!out.empty() && by_name.count(out))
          build_fail(EDGERT_ERR_FORMAT, "node '%s' writes '%s', which is already defined", label.c_str(), out.c_str());
        auto d = declared.find(out);
        if (d != declared.end() && d->second->type().value_case() != onnx::TypeProto::VALUE_NOT_SET)
          read_value_type(d->second->type(), v, "value '" + out + "'");
        node.outputs.push_back(define(std::move(v)));
        visible.insert(out);
      }
      for (const auto& ap : np.attribute()) node.attributes.push_back(attribute(ap, graph, by_name, label, visible));
      graph.nodes.push_back(std::move(node));
    }
    for (const auto& output : proto.output()) {
      auto found = by_name.find(output.name());
      if (found == by_name.end()) {
        if (!outer.count(output.name()))
          build_fail(EDGERT_ERR_FORMAT, "graph output '%s' is not produced by any node", output.name().c_str());
        Value captured;
        captured.name = output.name();
        found = by_name.emplace(output.name(), graph.add_value(std::move(captured))).first;
        captured_names_.push_back(output.name());
      }
      Value& v = graph.values[found->second];
      if (output.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) {
        Value declared_type;
        read_value_type(output.type(), declared_type, "graph output '" + output.name() + "'");
        v.kind = declared_type.kind;
        if (v.dtype == 0) v.dtype = declared_type.dtype;
        if (!v.rank_known) {
          v.shape = declared_type.shape;
          v.rank_known = declared_type.rank_known;
        }
      }
      graph.outputs.push_back(found->second);
    }
    for (const Value& v : graph.values)
      if (v.dtype == EDGERT_DTYPE_STRING)
        build_fail(EDGERT_ERR_UNSUPPORTED, "tensor '%s' has dtype string, which edgert does not support", v.name.c_str());
    model_.graphs[index] = std::move(graph);
  }

 private:
  Value constant_value(const onnx::NodeProto& np, const std::string& label) {
    for (const auto& ap : np.attribute()) {
      const std::string& a = ap.name();
      Value v;
      std::vector<uint8_t> bytes;
      if (a == "value") return tensor_from_proto(ap.t(), "Constant '" + label + "'", model_dir_);
      if (a == "value_float") {
        v.dtype = EDGERT_DTYPE_FLOAT32;
        float f = ap.f();
        bytes.resize(4);
        std::memcpy(bytes.data(), &f, 4);
      } else if (a == "value_floats") {
        v.dtype = EDGERT_DTYPE_FLOAT32;
        append_converted<decltype(ap.floats()), float>(ap.floats(), bytes);
        v.shape = {Dim{static_cast<int64_t>(ap.floats_size()), ""}};
      } else if (a == "value_int") {
        v.dtype = EDGERT_DTYPE_INT64;
        int64_t i = ap.i();
        bytes.resize(8);
        std::memcpy(bytes.data(), &i, 8);
      } else if (a == "value_ints") {
        v.dtype = EDGERT_DTYPE_INT64;
        append_converted<decltype(ap.ints()), int64_t>(ap.ints(), bytes);
        v.shape = {Dim{static_cast<int64_t>(ap.ints_size()), ""}};
      } else {
        build_fail(EDGERT_ERR_UNSUPPORTED, "Constant node '%s': attribute '%s' is not supported", label.c_str(), a.c_str());
      }
      v.rank_known = true;
      v.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
      return v;
    }
    build_fail(EDGERT_ERR_FORMAT, "Constant node '%s' has no value attribute", label.c_str());
  }

  Attribute attribute(const onnx::AttributeProto& ap, Graph& graph, std::unordered_map<std::string, int32_t>& by_name,
                      const std::string& label, const std::set<std::string>& visible) {
    Attribute a;
    a.name = ap.name();
    if (!ap.ref_attr_name().empty())
      build_fail(EDGERT_ERR_UNSUPPORTED, "node '%s': attribute '%s' refers to a function attribute", label.c_str(),
                 ap.name().c_str());
    switch (ap.type()) {
      case onnx::AttributeProto::FLOAT: a.type = EDGERT_ATTR_FLOAT; a.f = ap.f(); break;
      case onnx::AttributeProto::INT: a.type = EDGERT_ATTR_INT; a.i = ap.i(); break;
      case onnx::AttributeProto::STRING: a.type = EDGERT_ATTR_STRING; a.s = ap.s(); break;
      case onnx::AttributeProto::FLOATS:
        a.type = EDGERT_ATTR_FLOATS;
        a.floats.assign(ap.floats().begin(), ap.floats().end());
        break;
      case onnx::AttributeProto::INTS:
        a.type = EDGERT_ATTR_INTS;
        a.ints.assign(ap.ints().begin(), ap.ints().end());
        break;
      case onnx::AttributeProto::STRINGS:
        a.type = EDGERT_ATTR_STRINGS;
        a.strings.assign(ap.strings().begin(), ap.strings().end());
        break;
      case onnx::AttributeProto::TENSOR: {
        a.type = EDGERT_ATTR_TENSOR;
        Value v = tensor_from_proto(ap.t(), "attribute '" + ap.name() + "' of node '" + label + "'", model_dir_);
        v.name = label + ":" + ap.name();
        a.tensor = graph.add_value(std::move(v));
        by_name[graph.values[a.tensor].name] = a.tensor;
        break;
      }
      case onnx::AttributeProto::GRAPH: {
        a.type = EDGERT_ATTR_GRAPH;
        size_t index = model_.graphs.size();
        model_.graphs.emplace_back();
        GraphImporter sub(model_, model_dir_, opset_);
        sub.import(ap.g(), index, visible);
        a.graph = static_cast<int32_t>(index);
        // What the subgraph captures from further out must pass through this graph too.
        for (const std::string& name : sub.captured_names_) {
          if (by_name.count(name)) continue;
          Value captured;
          captured.name = name;
          by_name[name] = graph.add_value(std::move(captured));
          captured_names_.push_back(name);
        }
        break;
      }
      case onnx::AttributeProto::TYPE_PROTO: {
        // Only Optional's `type` (the type of an optional without a value) has one: kept as
        // ints {kind, element dtype}, which is all the runtime's Optional needs.
        Value typed;
        read_value_type(ap.tp(), typed, "attribute '" + ap.name() + "' of node '" + label + "'");
        a.type = EDGERT_ATTR_INTS;
        a.ints = {static_cast<int64_t>(typed.kind), typed.dtype};
        break;
      }
      default:
        build_fail(EDGERT_ERR_UNSUPPORTED, "node '%s': attribute '%s' has a type edgert does not support (%s)",
                   label.c_str(), ap.name().c_str(), onnx::AttributeProto::AttributeType_Name(ap.type()).c_str());
    }
    return a;
  }

  Model& model_;
  std::string model_dir_;
  int32_t opset_;
  std::vector<std::string> captured_names_;  // outer-scope names this graph reads
};

}  // namespace

Value tensor_from_proto(const onnx::TensorProto& proto, const std::string& what, const std::string& model_dir) {
  Value v;
  v.name = proto.name();
  v.dtype = proto.data_type();
  v.rank_known = true;
  uint64_t count = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0 || __builtin_mul_overflow(count, static_cast<uint64_t>(d), &count))
      build_fail(EDGERT_ERR_FORMAT, "%s has an invalid dimension %lld", what.c_str(), static_cast<long long>(d));
    v.shape.push_back(Dim{d, ""});
  }
  if (v.dtype == EDGERT_DTYPE_STRING)
    build_fail(EDGERT_ERR_UNSUPPORTED, "%s has dtype string, which edgert does not support", what.c_str());
  size_t element = edgert::dtype_size(v.dtype);
  if (element == 0)
    build_fail(EDGERT_ERR_UNSUPPORTED, "%s has ONNX data type %d, which edgert does not support", what.c_str(), v.dtype);
  uint64_t expected = 0;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(element), &expected))
    build_fail(EDGERT_ERR_FORMAT, "%s: its shape's size in bytes overflows 64 bits", what.c_str());
  // The 4- and 2-bit types are packed in the file and held a byte per element in memory.
  const bool packed = edgert_dtype_packed_bits(v.dtype) < 8;
  const uint64_t in_file = packed ? edgert_packed_bytes(v.dtype, count) : expected;

  std::vector<uint8_t> bytes;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    bytes = read_external(proto, what, model_dir, in_file);
  } else if (proto.has_raw_data()) {
    bytes.assign(proto.raw_data().begin(), proto.raw_data().end());
  } else {
    switch (v.dtype) {
      case EDGERT_DTYPE_FLOAT32: append_converted<decltype(proto.float_data()), float>(proto.float_data(), bytes); break;
      case EDGERT_DTYPE_FLOAT64: append_converted<decltype(proto.double_data()), double>(proto.double_data(), bytes); break;
      case EDGERT_DTYPE_INT64: append_converted<decltype(proto.int64_data()), int64_t>(proto.int64_data(), bytes); break;
      case EDGERT_DTYPE_UINT64: append_converted<decltype(proto.uint64_data()), uint64_t>(proto.uint64_data(), bytes); break;
      case EDGERT_DTYPE_UINT32: append_converted<decltype(proto.uint64_data()), uint32_t>(proto.uint64_data(), bytes); break;
      case EDGERT_DTYPE_INT32: append_converted<decltype(proto.int32_data()), int32_t>(proto.int32_data(), bytes); break;
      // int32_data carries the narrower types one per entry (float16/bfloat16 as their bits).
      case EDGERT_DTYPE_INT16: append_converted<decltype(proto.int32_data()), int16_t>(proto.int32_data(), bytes); break;
      case EDGERT_DTYPE_UINT16:
      case EDGERT_DTYPE_FLOAT16:
      case EDGERT_DTYPE_BFLOAT16:
        append_converted<decltype(proto.int32_data()), uint16_t>(proto.int32_data(), bytes);
        break;
      case EDGERT_DTYPE_INT8: append_converted<decltype(proto.int32_data()), int8_t>(proto.int32_data(), bytes); break;
      case EDGERT_DTYPE_UINT8:
      case EDGERT_DTYPE_BOOL: append_converted<decltype(proto.int32_data()), uint8_t>(proto.int32_data(), bytes); break;
      default:
        // The narrow types: one byte per entry (a float8 code, or two or four packed elements).
        if (edgert_dtype_is_narrow(v.dtype))
          append_converted<decltype(proto.int32_data()), uint8_t>(proto.int32_data(), bytes);
        break;
    }
  }
  if (packed) {
    if (bytes.size() != in_file)
      build_fail(EDGERT_ERR_FORMAT, "%s: shape needs %llu bytes of packed %s data, the tensor holds %zu", what.c_str(),
                 static_cast<unsigned long long>(in_file), edgert::dtype_name(v.dtype), bytes.size());
    std::vector<uint8_t> elements(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) elements[i] = edgert_unpack_element(v.dtype, bytes.data(), i);
    bytes = std::move(elements);
  }
  if (bytes.size() != expected)
    build_fail(EDGERT_ERR_FORMAT, "%s: shape needs %llu bytes of %s data, the tensor holds %zu", what.c_str(),
               static_cast<unsigned long long>(expected), edgert::dtype_name(v.dtype), bytes.size());
  v.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return v;
}

// The model file mapped read-only for parsing: protobuf copies what it keeps, so the file's
// bytes are never copied whole (a read into a buffer touched 47 MB more for resnet18, a fifth
// of a warm build). As with the runtime's mapped engines, a file truncated in place while it is
// parsed ends the process (SIGBUS); replacing it by rename, as edgert writes its own files,
// leaves the mapped copy intact.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) build_fail(EDGERT_ERR_IO, "cannot open model '%s': %s", path.c_str(), std::strerror(errno));
    struct stat st {};
    if (fstat(fd_, &st) != 0) build_fail(EDGERT_ERR_IO, "cannot read model '%s': %s", path.c_str(), std::strerror(errno));
    if (!S_ISREG(st.st_mode)) build_fail(EDGERT_ERR_IO, "cannot read model '%s': not a regular file", path.c_str());
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > static_cast<size_t>(kMaxModelBytes))
      build_fail(EDGERT_ERR_UNSUPPORTED, "model '%s' is %zu bytes; models over 2 GiB must keep weights as external data",
                 path.c_str(), size_);
    if (size_ == 0) return;
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd_, 0);
    if (map == MAP_FAILED) build_fail(EDGERT_ERR_IO, "cannot map model '%s': %s", path.c_str(), std::strerror(errno));
    data_ = static_cast<const char*>(map);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return data_ ? data_ : ""; }
  size_t size() const { return size_; }

 private:
  int fd_ = -1;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

Model import_onnx(const std::string& path) {
  onnx::ModelProto proto;
  {
    MappedFile content(path);
    google::protobuf::io::ArrayInputStream raw(content.data(), static_cast<int>(content.size()));
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(kMaxModelBytes);
    if (!proto.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
      build_fail(EDGERT_ERR_FORMAT, "'%s' is not a valid ONNX model: protobuf parsing failed (truncated or not ONNX)",
                 path.c_str());
  }
  if (!proto.has_graph())
    build_fail(EDGERT_ERR_FORMAT, "'%s' is not a valid ONNX model: it has no graph", path.c_str());

  Model model;
  model.source_path = path;
  model.producer = proto.producer_name() + (proto.producer_version().empty() ? "" : " " + proto.producer_version());
  for (const auto& op : proto.opset_import())
    model.opsets[op.domain() == "ai.onnx" ? "" : op.domain()] = op.version();
  // A model of another domain only (ai.onnx.ml's classic models) need not import ai.onnx; a
  // node of ai.onnx in it is refused where it is imported.
  try {
    check_opset_imports(model.opsets);
  } catch (const BuildError& e) {
    throw BuildError(e.status(), path + ": " + e.what());
  }
  model.graphs.emplace_back();
  auto default_opset = model.opsets.find("");
  GraphImporter importer(model, dir_of(path), default_opset == model.opsets.end() ? 0 : static_cast<int32_t>(default_opset->second));
  try {
    importer.import(proto.graph(), 0, {});
    infer_value_kinds(model);
  } catch (const BuildError& e) {
    throw BuildError(e.status(), path + ": " + e.what());
  }
  return model;
}

}  // namespace edgert::builder

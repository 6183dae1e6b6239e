#include "yaml_tree.h"

#include <yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "contained_file.h"

namespace edgert::config {
namespace {

std::string where(const std::string& label, const yaml_mark_t& mark) {
  return label + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

class Builder {
 public:
  Builder(yaml_parser_t* parser, std::string label) : parser_(parser), label_(std::move(label)) {}

  std::unique_ptr<YamlNode> document() {
    yaml_event_t event;
    std::unique_ptr<YamlNode> root;
    for (;;) {
      next(&event);
      yaml_event_type_t type = event.type;
      if (type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&event);
        break;
      }
      if (type == YAML_DOCUMENT_START_EVENT) {
        yaml_event_delete(&event);
        if (root) throw ConfigError(where(label_, event.start_mark) + ": only one YAML document is allowed");
        next(&event);
        if (event.type == YAML_DOCUMENT_END_EVENT) {
          yaml_event_delete(&event);
          root = std::make_unique<YamlNode>();
          root->kind = YamlNode::Kind::Mapping;
          continue;
        }
        root = node(&event);
        next(&event);  // DOCUMENT_END
        yaml_event_delete(&event);
        continue;
      }
      yaml_event_delete(&event);
    }
    if (!root) {
      root = std::make_unique<YamlNode>();
      root->kind = YamlNode::Kind::Mapping;
    }
    return root;
  }

 private:
  void next(yaml_event_t* event) {
    if (!yaml_parser_parse(parser_, event))
      throw ConfigError(where(label_, parser_->problem_mark) + ": YAML syntax error: " +
                        (parser_->problem ? parser_->problem : "unknown") +
                        (parser_->context ? std::string(" ") + parser_->context : ""));
  }

  // Takes ownership of `event` (deletes it).
  std::unique_ptr<YamlNode> node(yaml_event_t* event) {
    auto n = std::make_unique<YamlNode>();
    n->line = static_cast<int>(event->start_mark.line) + 1;
    n->column = static_cast<int>(event->start_mark.column) + 1;
    yaml_mark_t mark = event->start_mark;
    if (++depth_ > 64) {
      yaml_event_delete(event);  // ours to delete on every path, this one too
      throw ConfigError(where(label_, mark) + ": nesting deeper than 64 levels");
    }
    switch (event->type) {
      case YAML_ALIAS_EVENT:
        yaml_event_delete(event);
        throw ConfigError(where(label_, mark) + ": YAML aliases are not allowed in edgert configuration");
      case YAML_SCALAR_EVENT:
        if (event->data.scalar.anchor) {
          yaml_event_delete(event);
          throw ConfigError(where(label_, mark) + ": YAML anchors are not allowed in edgert configuration");
        }
        n->scalar.assign(reinterpret_cast<const char*>(event->data.scalar.value), event->data.scalar.length);
        yaml_event_delete(event);
        break;
      case YAML_SEQUENCE_START_EVENT: {
        yaml_event_delete(event);
        n->kind = YamlNode::Kind::Sequence;
        for (;;) {
          yaml_event_t child;
          next(&child);
          if (child.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&child);
            break;
          }
          n->items.push_back(node(&child));
        }
        break;
      }
      case YAML_MAPPING_START_EVENT: {
        yaml_event_delete(event);
        n->kind = YamlNode::Kind::Mapping;
        for (;;) {
          yaml_event_t key;
          next(&key);
          if (key.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&key);
            break;
          }
          yaml_mark_t key_mark = key.start_mark;
          if (key.type != YAML_SCALAR_EVENT) {
            yaml_event_delete(&key);
            throw ConfigError(where(label_, key_mark) + ": mapping keys must be plain scalars");
          }
          std::string name(reinterpret_cast<const char*>(key.data.scalar.value), key.data.scalar.length);
          yaml_event_delete(&key);
          for (const auto& [existing, value] : n->map)
            if (existing == name) throw ConfigError(where(label_, key_mark) + ": duplicate key '" + name + "'");
          yaml_event_t value;
          next(&value);
          n->map.emplace_back(name, node(&value));
          n->key_lines.push_back(static_cast<int>(key_mark.line) + 1);
          n->key_columns.push_back(static_cast<int>(key_mark.column) + 1);
        }
        break;
      }
      default:
        yaml_event_delete(event);
        throw ConfigError(where(label_, mark) + ": unexpected YAML event");
    }
    --depth_;
    return n;
  }

  yaml_parser_t* parser_;
  std::string label_;
  int depth_ = 0;
};

}  // namespace

const YamlNode* YamlNode::get(const std::string& key) const {
  for (const auto& [name, value] : map)
    if (name == key) return value.get();
  return nullptr;
}

std::unique_ptr<YamlNode> load_yaml_string(const std::string& text, const std::string& label) {
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) throw ConfigError(label + ": cannot initialise the YAML parser");
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  try {
    auto root = Builder(&parser, label).document();
    yaml_parser_delete(&parser);
    return root;
  } catch (...) {
    yaml_parser_delete(&parser);
    throw;
  }
}

std::unique_ptr<YamlNode> load_yaml_file(const std::string& path) {
  // A regular file of bounded size, opened without blocking: a path from a configuration (a
  // board named by path) may be a directory, a FIFO or a device.
  ReadOnlyFile file;
  std::string why;
  if (!file.open(path, &why)) throw ConfigError(path + ": cannot read: " + why);
  if (file.size() > (1u << 20)) throw ConfigError(path + ": larger than 1 MiB, not a configuration file");
  std::string text(file.size(), '\0');
  if (!file.read_at(0, text.data(), text.size(), &why)) throw ConfigError(path + ": cannot read: " + why);
  return load_yaml_string(text, path);
}

void YamlReader::fail(const YamlNode& at, const std::string& message) const {
  throw ConfigError(file_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " + message);
}

void YamlReader::expect_keys(const YamlNode& node, const std::vector<std::string>& allowed, const std::string& where) const {
  if (node.kind != YamlNode::Kind::Mapping) fail(node, where + " must be a mapping");
  for (size_t i = 0; i < node.map.size(); ++i) {
    const std::string& key = node.map[i].first;
    bool known = false;
    for (const std::string& a : allowed) known = known || a == key;
    if (!known) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw ConfigError(file_ + ":" + std::to_string(node.key_lines[i]) + ":" + std::to_string(node.key_columns[i]) +
                        ": unknown key '" + key + "' in " + where +
                        " (known keys: " + list + ")");
    }
  }
}

const YamlNode& YamlReader::require(const YamlNode& map, const std::string& key, const std::string& where) const {
  const YamlNode* n = map.get(key);
  if (!n) fail(map, "missing key '" + key + "' in " + where);
  return *n;
}

std::string YamlReader::string_value(const YamlNode& node, const std::string& key) const {
  if (node.kind != YamlNode::Kind::Scalar) fail(node, "'" + key + "' must be a string");
  return node.scalar;
}

int64_t YamlReader::int_value(const YamlNode& node, const std::string& key, int64_t min, int64_t max) const {
  if (node.kind != YamlNode::Kind::Scalar) fail(node, "'" + key + "' must be an integer");
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(node.scalar.c_str(), &end, 10);
  if (node.scalar.empty() || *end != '\0' || errno == ERANGE)
    fail(node, "'" + key + "' must be an integer, got '" + node.scalar + "'");
  if (v < min || v > max)
    fail(node, "'" + key + "' must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                   node.scalar);
  return v;
}

double YamlReader::number_value(const YamlNode& node, const std::string& key) const {
  if (node.kind != YamlNode::Kind::Scalar) fail(node, "'" + key + "' must be a number");
  char* end = nullptr;
  double v = std::strtod(node.scalar.c_str(), &end);
  if (node.scalar.empty() || *end != '\0') fail(node, "'" + key + "' must be a number, got '" + node.scalar + "'");
  return v;
}

bool YamlReader::bool_value(const YamlNode& node, const std::string& key) const {
  if (node.kind == YamlNode::Kind::Scalar) {
    if (node.scalar == "true" || node.scalar == "yes" || node.scalar == "on") return true;
    if (node.scalar == "false" || node.scalar == "no" || node.scalar == "off") return false;
  }
  fail(node, "'" + key + "' must be true or false");
}

std::vector<std::string> YamlReader::string_list(const YamlNode& node, const std::string& key) const {
  if (node.kind != YamlNode::Kind::Sequence) fail(node, "'" + key + "' must be a list");
  std::vector<std::string> out;
  for (const auto& item : node.items) out.push_back(string_value(*item, key));
  return out;
}

}  // namespace edgert::config

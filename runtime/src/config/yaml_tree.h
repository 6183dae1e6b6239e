// A YAML document loaded with libyaml into a small tree that remembers where each node came
// from, so configuration errors can say file:line:column and the key.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace edgert::config {

struct YamlNode {
  enum class Kind { Scalar, Sequence, Mapping };
  Kind kind = Kind::Scalar;
  std::string scalar;
  std::vector<std::unique_ptr<YamlNode>> items;                        // Sequence
  std::vector<std::pair<std::string, std::unique_ptr<YamlNode>>> map;  // Mapping, in file order
  int line = 0;    // 1-based
  int column = 0;  // 1-based
  std::vector<int> key_lines;    // per map entry: line of the key
  std::vector<int> key_columns;  // per map entry: column of the key

  const YamlNode* get(const std::string& key) const;
};

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses `path`; throws ConfigError "file:line:column: message" on syntax errors, and for
// duplicate keys, anchors/aliases (not needed for configuration, a source of surprises).
std::unique_ptr<YamlNode> load_yaml_file(const std::string& path);
std::unique_ptr<YamlNode> load_yaml_string(const std::string& text, const std::string& label);

// Typed access with located errors. `file` is the label used in messages.
class YamlReader {
 public:
  YamlReader(const YamlNode& root, std::string file) : root_(root), file_(std::move(file)) {}

  [[noreturn]] void fail(const YamlNode& at, const std::string& message) const;
  const YamlNode& root() const { return root_; }
  const std::string& file() const { return file_; }

  // Fails when `node` is not a mapping or has keys outside `allowed`: unknown keys are errors.
  void expect_keys(const YamlNode& node, const std::vector<std::string>& allowed, const std::string& where) const;
  const YamlNode& require(const YamlNode& map, const std::string& key, const std::string& where) const;
  std::string string_value(const YamlNode& node, const std::string& key) const;
  int64_t int_value(const YamlNode& node, const std::string& key, int64_t min, int64_t max) const;
  double number_value(const YamlNode& node, const std::string& key) const;
  bool bool_value(const YamlNode& node, const std::string& key) const;
  std::vector<std::string> string_list(const YamlNode& node, const std::string& key) const;

 private:
  const YamlNode& root_;
  std::string file_;
};

}  // namespace edgert::config

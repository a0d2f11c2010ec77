// Builds the Status of an error at a place in a YAML file ("file:line: field: message"), for
// every parser of sluice's YAML files. yaml-cpp counts lines from 0. A plain value.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "sluice/status.h"

namespace sluice::config {

class YamlReporter {
 public:
  explicit YamlReporter(std::string_view file) : file_(file) {}

  Status At(const YAML::Mark& mark, std::string_view field, std::string_view message) const {
    std::string where(file_);
    if (!mark.is_null()) where += ":" + std::to_string(mark.line + 1);
    return Status::InvalidArgument(where + ": " + std::string(field) + ": " + std::string(message));
  }
  Status At(const YAML::Node& node, std::string_view field, std::string_view message) const {
    return At(node.Mark(), field, message);
  }

 private:
  std::string_view file_;
};

}  // namespace sluice::config

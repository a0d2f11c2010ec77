// The fields of one YAML mapping, read strictly, for every parser of sluice's YAML files (the
// serve configuration and envoyproxy/ratelimit's): each field known and given once, typed reads,
// and errors that name the file, the line and the field ("file:line: field: message"). Also the
// reading of such a file into a YAML node. A plain value, not synchronised; it holds the mapping's
// node and refers to the reporter, which must outlive it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "config/yaml_reporter.h"
#include "sluice/clock.h"
#include "sluice/status.h"

namespace sluice::config {

// How a file's scalars read.
enum class YamlDialect {
  // true/false only; a field given as null is a null value; an integer is digits with an optional
  // '-', quoted or not.
  kStrict,
  // As YAML 1.1 (and Go's yaml.v2) reads them: true/false, yes/no, on/off; a field given as null
  // is absent; an integer may start with '+', and a quoted one is a string.
  kYaml11,
};

class YamlFields {
 public:
  // `path` names the mapping in errors ("" for the top level: "(top level)").
  YamlFields(const YamlReporter& report, const YAML::Node& map, std::string path,
             YamlDialect dialect = YamlDialect::kStrict);

  // Checks that the mapping is one whose keys are all in `known`, none repeated.
  Status Check(std::initializer_list<std::string_view> known) const;

  // The path of `field` in errors: "path.field".
  std::string Path(std::string_view field) const;
  const YamlReporter& report() const { return *report_; }

  // The value of a field, or an undefined node when it is absent (or, in kYaml11, null).
  YAML::Node Get(std::string_view field) const;
  bool Has(std::string_view field) const { return Get(field).IsDefined(); }

  // "missing required field", at the mapping.
  Status Missing(std::string_view field) const;
  // An error about `field`: at its value when given, else at the mapping.
  Status Error(std::string_view field, std::string_view message) const;

  // `node` is the value of `field` (or of an item of it, `field` naming the item).
  Result<std::string> ReadString(const YAML::Node& node, std::string_view field) const;
  Result<int64_t> ReadInteger(const YAML::Node& node, std::string_view field) const;
  Result<bool> ReadBool(const YAML::Node& node, std::string_view field) const;
  // The boolean `field` into `target` when given; `target` stays as it is when absent.
  Status ReadOptionalBool(std::string_view field, bool& target) const;
  // A duration as people write them ("250ms", "10s"; config/duration.h).
  Result<sluice::Duration> ReadDuration(const YAML::Node& node, std::string_view field) const;

 private:
  const YamlReporter* report_;
  YAML::Node map_;
  std::string path_;
  YamlDialect dialect_;
};

// The text of the file at `path`, of at most `max_bytes`; errors name it as "<what> '<path>'"
// ("cannot open config file 'sluice.yaml': No such file or directory").
Result<std::string> ReadYamlFile(const std::string& path, std::string_view what, size_t max_bytes);

// `text` parsed; a syntax error is "file:line: (syntax): message". An empty document is a node
// that is null or undefined.
Result<YAML::Node> ParseYaml(std::string_view text, const YamlReporter& report);

}  // namespace sluice::config

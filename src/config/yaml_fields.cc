#include "config/yaml_fields.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>

#include "config/duration.h"

namespace sluice::config {

YamlFields::YamlFields(const YamlReporter& report, const YAML::Node& map, std::string path,
                       YamlDialect dialect)
    : report_(&report), map_(map), path_(std::move(path)), dialect_(dialect) {}

Status YamlFields::Check(std::initializer_list<std::string_view> known) const {
  if (!map_.IsMap()) {
    return report_->At(map_, path_.empty() ? "(top level)" : path_, "expected a mapping of fields");
  }
  std::set<std::string, std::less<>> seen;
  for (const auto& kv : map_) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) return report_->At(key, path_, "field names must be plain strings");
    const std::string& name = key.Scalar();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string expected;
      for (std::string_view k : known) expected += (expected.empty() ? "" : ", ") + std::string(k);
      return report_->At(key, Path(name), "unknown field (expected " + expected + ")");
    }
    if (!seen.insert(name).second) return report_->At(key, Path(name), "field given twice");
  }
  return Status::Ok();
}

std::string YamlFields::Path(std::string_view field) const {
  return path_.empty() ? std::string(field) : path_ + "." + std::string(field);
}

YAML::Node YamlFields::Get(std::string_view field) const {
  for (const auto& kv : map_) {
    if (kv.first.Scalar() != field) continue;
    if (dialect_ == YamlDialect::kYaml11 && kv.second.IsNull()) break;
    return kv.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

Status YamlFields::Missing(std::string_view field) const {
  return report_->At(map_, Path(field), "missing required field");
}

Status YamlFields::Error(std::string_view field, std::string_view message) const {
  const YAML::Node value = Get(field);
  return report_->At(value.IsDefined() ? value.Mark() : map_.Mark(), Path(field), message);
}

Result<std::string> YamlFields::ReadString(const YAML::Node& node, std::string_view field) const {
  if (!node.IsScalar()) return report_->At(node, Path(field), "expected a string");
  return node.Scalar();
}

Result<int64_t> YamlFields::ReadInteger(const YAML::Node& node, std::string_view field) const {
  const bool yaml11 = dialect_ == YamlDialect::kYaml11;
  if (!node.IsScalar() && !yaml11) return report_->At(node, Path(field), "expected an integer");
  const std::string text = node.IsScalar() ? node.Scalar() : std::string();
  const char* begin = text.data() + (yaml11 && text.starts_with('+') ? 1 : 0);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), value);
  // In YAML 1.1 a quoted number is a string.
  const bool quoted = yaml11 && node.Tag() == "!";
  if (!node.IsScalar() || quoted || text.empty() || ec != std::errc() ||
      end != text.data() + text.size()) {
    return report_->At(node, Path(field), "expected an integer, got '" + text + "'");
  }
  return value;
}

Result<bool> YamlFields::ReadBool(const YAML::Node& node, std::string_view field) const {
  if (node.IsScalar()) {
    if (dialect_ == YamlDialect::kYaml11) {
      if (bool b = false; YAML::convert<bool>::decode(node, b)) return b;
    } else if (node.Scalar() == "true" || node.Scalar() == "false") {
      return node.Scalar() == "true";
    }
  }
  return report_->At(node, Path(field), "expected true or false");
}

Status YamlFields::ReadOptionalBool(std::string_view field, bool& target) const {
  const YAML::Node node = Get(field);
  if (!node.IsDefined()) return Status::Ok();
  auto value = ReadBool(node, field);
  if (!value.ok()) return value.status();
  target = *value;
  return Status::Ok();
}

Result<sluice::Duration> YamlFields::ReadDuration(const YAML::Node& node,
                                                  std::string_view field) const {
  auto text = ReadString(node, field);
  if (!text.ok()) return text.status();
  auto duration = ParseDuration(*text);
  if (!duration.ok()) return report_->At(node, Path(field), duration.status().message());
  return *duration;
}

Result<std::string> ReadYamlFile(const std::string& path, std::string_view what, size_t max_bytes) {
  const std::string named = std::string(what) + " '" + path + "'";
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot open " + named + ": " + std::strerror(errno));
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Status::InvalidArgument("cannot read " + named);
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    return Status::InvalidArgument(named + " is larger than " + std::to_string(max_bytes >> 20) +
                                   " MiB");
  }
  return text;
}

Result<YAML::Node> ParseYaml(std::string_view text, const YamlReporter& report) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return report.At(e.mark, "(syntax)", e.msg);
  }
}

}  // namespace sluice::config

// Reads envoyproxy/ratelimit's YAML configuration (see config.h) into plain values, with errors
// that name the file, the line and the field.
#include "rls/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>
#include <utility>

#include "config/yaml_fields.h"

namespace sluice::rls {
namespace {

std::string Quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

using Reporter = config::YamlReporter;

// One YAML mapping whose field names were checked against those its level allows, read as that
// service's YAML library reads: a field given as null reads as absent, it leaving the zero value.
class Mapping : public config::YamlFields {
 public:
  static Result<Mapping> Read(const Reporter& report, const YAML::Node& node, std::string path,
                              std::initializer_list<std::string_view> known) {
    Mapping mapping(report, node, std::move(path));
    if (Status s = mapping.Check(known); !s.ok()) return s;
    return mapping;
  }

  // Any scalar reads as its text ("value: 500" is "500"), as in that service. "" when absent.
  Result<std::string> String(std::string_view field) const {
    const YAML::Node value = Get(field);
    if (!value.IsDefined()) return std::string();
    return ReadString(value, field);
  }

  // true/false, yes/no, on/off; false when absent.
  Result<bool> Bool(std::string_view field) const {
    const YAML::Node value = Get(field);
    if (!value.IsDefined()) return false;
    return ReadBool(value, field);
  }

  // A decimal integer from `min` to `max`; nullopt when absent.
  Result<std::optional<int64_t>> Integer(std::string_view field, int64_t min, int64_t max) const {
    const YAML::Node value = Get(field);
    if (!value.IsDefined()) return std::optional<int64_t>();
    auto n = ReadInteger(value, field);
    if (!n.ok()) return n.status();
    if (*n < min || *n > max) {
      return Error(field, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    }
    return std::optional<int64_t>(*n);
  }

 private:
  Mapping(const Reporter& report, const YAML::Node& node, std::string path)
      : YamlFields(report, node, std::move(path), config::YamlDialect::kYaml11) {}
};

// Converts a plain YAML scalar as YAML 1.1 (and so that service) types it.
nlohmann::json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (bool b = false; YAML::convert<bool>::decode(node, b)) return b;
  const bool numeric_start =
      (text[0] >= '0' && text[0] <= '9') || text[0] == '-' || text[0] == '+' || text[0] == '.';
  const bool numeric_chars = std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  });
  if (numeric_start && numeric_chars) {
    double number = 0;
    const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
    const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), number);
    // Numbers become doubles, as in a google.protobuf.Struct.
    if (ec == std::errc() && end == text.data() + text.size()) return number;
  }
  return text;
}

Result<nlohmann::json> ToJson(const Reporter& report, const YAML::Node& node,
                              const std::string& path) {
  if (node.IsScalar()) return ScalarToJson(node);
  if (node.IsNull()) return nlohmann::json(nullptr);
  if (node.IsSequence()) {
    nlohmann::json array = nlohmann::json::array();
    for (size_t i = 0; i < node.size(); ++i) {
      auto item = ToJson(report, node[i], path + "[" + std::to_string(i) + "]");
      if (!item.ok()) return item.status();
      array.push_back(std::move(*item));
    }
    return array;
  }
  nlohmann::json object = nlohmann::json::object();
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) return report.At(kv.first, path, "keys must be plain strings");
    auto value = ToJson(report, kv.second, path + "." + kv.first.Scalar());
    if (!value.ok()) return value.status();
    object[kv.first.Scalar()] = std::move(*value);
  }
  return object;
}

// `field` must be absent or a list; calls `each(item, path)` on its items.
template <typename Each>
Status ForEachItem(const Mapping& map, std::string_view field, Each each) {
  const YAML::Node list = map.Get(field);
  if (!list.IsDefined()) return Status::Ok();
  if (!list.IsSequence()) return map.Error(field, "expected a list");
  for (size_t i = 0; i < list.size(); ++i) {
    if (Status s = each(list[i], map.Path(field) + "[" + std::to_string(i) + "]"); !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

struct ParsedLimit {
  bool unlimited = false;
  RateLimitSpec spec;
  std::vector<std::string> replaces;
};

Status ParseReplaces(const Mapping& map, const std::string& own_name,
                     std::vector<std::string>& replaces) {
  return ForEachItem(map, "replaces", [&](const YAML::Node& item, const std::string& path) {
    auto entry = Mapping::Read(map.report(), item, path, {"name"});
    if (!entry.ok()) return entry.status();
    auto name = entry->String("name");
    if (!name.ok()) return name.status();
    if (name->empty()) return entry->Error("name", "a replaces entry needs a name");
    if (*name == own_name) {
      return entry->Error("name", "a rate limit cannot replace itself ('" + *name + "')");
    }
    replaces.push_back(std::move(*name));
    return Status::Ok();
  });
}

// Builds the sluice Limit, pointing at the field the library's complaint is about.
Status BuildLimit(const Mapping& map, Algorithm algorithm, std::optional<int64_t> burst,
                  RateLimitSpec& spec) {
  if (spec.requests_per_unit == 0) {
    if (burst)
      return map.Error("burst", "requests_per_unit 0 admits nothing; burst does not apply");
    return Status::Ok();
  }
  auto limit = Limit::Create(algorithm, spec.requests_per_unit, UnitDuration(spec.unit), burst);
  if (limit.ok()) {
    spec.limit = *limit;
    return Status::Ok();
  }
  const std::string message = limit.status().message();
  if (burst && message.find("burst") != std::string::npos) return map.Error("burst", message);
  return map.Error("requests_per_unit", message);
}

// A `rate_limit` mapping, or one item of `rate_limits` (which cannot be unlimited).
Result<ParsedLimit> ParseLimit(const Reporter& report, const YAML::Node& node,
                               const std::string& path, bool in_list) {
  auto map = Mapping::Read(report, node, path,
                           {"unit", "requests_per_unit", "unlimited", "name", "replaces",
                            "algorithm", "burst", "on_error"});
  if (!map.ok()) return map.status();
  ParsedLimit parsed;
  auto unlimited = map->Bool("unlimited");
  if (!unlimited.ok()) return unlimited.status();
  parsed.unlimited = *unlimited;
  if (parsed.unlimited && in_list) {
    return map->Error("unlimited", "an unlimited rate limit goes in rate_limit, not rate_limits");
  }

  auto name = map->String("name");
  if (!name.ok()) return name.status();
  parsed.spec.name = std::move(*name);
  if (Status s = ParseReplaces(*map, parsed.spec.name, parsed.replaces); !s.ok()) return s;
  auto requests = map->Integer("requests_per_unit", 0, std::numeric_limits<uint32_t>::max());
  if (!requests.ok()) return requests.status();
  // Absent is 0, as in that service: every hit is over the limit.
  parsed.spec.requests_per_unit = static_cast<uint32_t>(requests->value_or(0));

  if (parsed.unlimited) {
    for (std::string_view field : {"unit", "algorithm", "burst", "on_error"}) {
      if (map->Has(field)) return map->Error(field, "does not apply to an unlimited rate limit");
    }
    return parsed;
  }

  auto unit_name = map->String("unit");
  if (!unit_name.ok()) return unit_name.status();
  if (!map->Has("unit")) return map->Error("unit", "missing required field");
  const std::optional<Unit> unit = ParseUnitName(*unit_name);
  if (!unit) {
    return map->Error("unit", "unknown unit " + Quoted(*unit_name) +
                                  " (expected second, minute, hour, day, week, month or year)");
  }
  parsed.spec.unit = *unit;

  Algorithm algorithm = Algorithm::kFixedWindow;
  if (map->Has("algorithm")) {
    auto algorithm_name = map->String("algorithm");
    if (!algorithm_name.ok()) return algorithm_name.status();
    auto parsed_algorithm = ParseAlgorithm(*algorithm_name);
    if (!parsed_algorithm.ok()) {
      return map->Error("algorithm", parsed_algorithm.status().message());
    }
    algorithm = *parsed_algorithm;
  }
  auto burst = map->Integer("burst", 1, Limit::kMaxCount);
  if (!burst.ok()) return burst.status();
  if (map->Has("on_error")) {
    auto policy_name = map->String("on_error");
    if (!policy_name.ok()) return policy_name.status();
    auto policy = ParseFailurePolicy(*policy_name);
    if (!policy.ok()) return map->Error("on_error", policy.status().message());
    parsed.spec.on_error = *policy;
  }
  if (Status s = BuildLimit(*map, algorithm, *burst, parsed.spec); !s.ok()) return s;
  return parsed;
}

Result<Rule> ParseRule(const Mapping& descriptor) {
  const Reporter& report = descriptor.report();
  Rule rule;
  if (descriptor.Has("rate_limit")) {
    if (descriptor.Has("rate_limits")) {
      return descriptor.Error("rate_limits", "give either rate_limit or rate_limits, not both");
    }
    auto parsed = ParseLimit(report, descriptor.Get("rate_limit"), descriptor.Path("rate_limit"),
                             /*in_list=*/false);
    if (!parsed.ok()) return parsed.status();
    rule.unlimited = parsed->unlimited;
    if (!rule.unlimited) rule.limits.push_back(std::move(parsed->spec));
    rule.replaces = std::move(parsed->replaces);
    return rule;
  }
  const YAML::Node list = descriptor.Get("rate_limits");
  if (!list.IsSequence() || list.size() == 0) {
    return descriptor.Error("rate_limits", "expected a non-empty list of rate limits");
  }
  std::vector<YAML::Mark> name_marks;
  Status status =
      ForEachItem(descriptor, "rate_limits", [&](const YAML::Node& item, const std::string& path) {
        auto parsed = ParseLimit(report, item, path, /*in_list=*/true);
        if (!parsed.ok()) return parsed.status();
        const std::string& name = parsed->spec.name;
        if (!name.empty()) {
          for (const RateLimitSpec& earlier : rule.limits) {
            if (earlier.name == name) {
              return report.At(item["name"], path + ".name",
                               "two limits of one descriptor named " + Quoted(name));
            }
          }
        }
        rule.limits.push_back(std::move(parsed->spec));
        name_marks.push_back(item.Mark());
        for (std::string& replaced : parsed->replaces) {
          if (std::find(rule.replaces.begin(), rule.replaces.end(), replaced) ==
              rule.replaces.end()) {
            rule.replaces.push_back(std::move(replaced));
          }
        }
        return Status::Ok();
      });
  if (!status.ok()) return status;
  for (size_t i = 0; i < rule.limits.size(); ++i) {
    const std::string& name = rule.limits[i].name;
    if (!name.empty() &&
        std::find(rule.replaces.begin(), rule.replaces.end(), name) != rule.replaces.end()) {
      return report.At(name_marks[i],
                       descriptor.Path("rate_limits") + "[" + std::to_string(i) + "].name",
                       "a rate limit cannot replace itself ('" + name + "')");
    }
  }
  return rule;
}

Status ParseDescriptors(const Mapping& parent, const std::string& parent_key, size_t depth,
                        std::vector<Descriptor>& out) {
  // The composite keys of this level: "key" or "key_value", unique as in that service.
  std::set<std::string, std::less<>> composites;
  return ForEachItem(parent, "descriptors", [&](const YAML::Node& node, const std::string& path) {
    if (depth >= kMaxDescriptorDepth) {
      return parent.report().At(
          node, path,
          "descriptors nested more than " + std::to_string(kMaxDescriptorDepth) + " deep");
    }
    auto map = Mapping::Read(
        parent.report(), node, path,
        {"key", "value", "rate_limit", "rate_limits", "descriptors", "shadow_mode", "quota_mode",
         "detailed_metric", "value_to_metric", "share_threshold", "metadata"});
    if (!map.ok()) return map.status();
    Descriptor d;
    auto key = map->String("key");
    if (!key.ok()) return key.status();
    if (key->empty()) return map->Error("key", "a descriptor needs a non-empty key");
    auto value = map->String("value");
    if (!value.ok()) return value.status();
    d.key = std::move(*key);
    d.value = std::move(*value);
    const std::string composite = d.value.empty() ? d.key : d.key + "_" + d.value;
    d.full_key = parent_key + "." + composite;
    if (!composites.insert(composite).second) {
      return map->Error("key", "duplicate descriptor composite key " + Quoted(d.full_key));
    }
    for (auto [field, flag] :
         {std::pair{"shadow_mode", &d.shadow_mode}, std::pair{"quota_mode", &d.quota_mode},
          std::pair{"detailed_metric", &d.detailed_metric},
          std::pair{"value_to_metric", &d.value_to_metric},
          std::pair{"share_threshold", &d.share_threshold}}) {
      auto b = map->Bool(field);
      if (!b.ok()) return b.status();
      *flag = *b;
    }
    if (d.share_threshold && composite.find('*') == std::string::npos) {
      return map->Error("share_threshold", "applies only to a wildcard value (one with '*')");
    }
    if (const YAML::Node metadata = map->Get("metadata"); metadata.IsDefined()) {
      if (!metadata.IsMap()) return map->Error("metadata", "expected a mapping");
      auto json = ToJson(parent.report(), metadata, map->Path("metadata"));
      if (!json.ok()) return json.status();
      d.metadata = std::move(*json);
    }
    if (map->Has("rate_limit") || map->Has("rate_limits")) {
      auto rule = ParseRule(*map);
      if (!rule.ok()) return rule.status();
      d.rule = std::move(*rule);
    }
    if (Status s = ParseDescriptors(*map, d.full_key, depth + 1, d.descriptors); !s.ok()) return s;
    out.push_back(std::move(d));
    return Status::Ok();
  });
}

}  // namespace

Result<DomainConfig> ParseDomainConfig(std::string_view yaml, std::string_view file_name) {
  const Reporter report(file_name);
  auto root = config::ParseYaml(yaml, report);
  if (!root.ok()) return root.status();
  if (!root->IsDefined() || root->IsNull()) {
    return report.At(YAML::Mark::null_mark(), "domain", "the file is empty; it needs a domain");
  }
  auto top = Mapping::Read(report, *root, "", {"domain", "descriptors"});
  if (!top.ok()) return top.status();
  DomainConfig config;
  config.file = std::string(file_name);
  auto domain = top->String("domain");
  if (!domain.ok()) return domain.status();
  if (domain->empty()) return top->Error("domain", "a config file needs a non-empty domain");
  config.domain = std::move(*domain);
  if (Status s = ParseDescriptors(*top, config.domain, 0, config.descriptors); !s.ok()) return s;
  return config;
}

}  // namespace sluice::rls

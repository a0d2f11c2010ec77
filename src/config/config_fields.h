// The reads shared by the sections of `sluice serve`'s configuration file: one mapping's fields,
// with this file's own kinds of value (sizes, waiter bounds, names). Stateless; safe from any
// thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/yaml_fields.h"

namespace sluice::config {

using Reporter = YamlReporter;

// A character of a name: [A-Za-z0-9_.:-]. Names appear in JSON, metric labels, RateLimit headers
// and Redis ACL key patterns.
bool IsNameChar(char c);

class Fields : public YamlFields {
 public:
  using YamlFields::YamlFields;

  // A size in bytes: a whole number of bytes, KiB, MiB, GiB or TiB, from kMinMaxMemory to
  // kMaxMaxMemory.
  Result<size_t> ReadMemorySize(const YAML::Node& node, std::string_view field) const;

  // A bound on /v1/acquire waiters: an integer from 1 to kMaxWaitersBound.
  Result<size_t> ReadWaitersBound(const YAML::Node& node, std::string_view field) const;

  // Reads the optional waiter bounds `max_waiters` and `max_waiters_per_key` into `bounds`.
  template <typename Bounds>
  Status ReadWaitersBounds(Bounds& bounds) const {
    for (auto [field, target] : {std::pair{"max_waiters", &bounds.max_waiters},
                                 std::pair{"max_waiters_per_key", &bounds.max_waiters_per_key}}) {
      const YAML::Node node = Get(field);
      if (!node.IsDefined()) continue;
      auto n = ReadWaitersBound(node, field);
      if (!n.ok()) return n.status();
      *target = *n;
    }
    return Status::Ok();
  }

  // A name, of a rule, a caller or anything else the config names: 1 to kMaxRuleNameBytes
  // characters IsNameChar accepts. `what` ("rule name") is for the message.
  Result<std::string> ReadName(const YAML::Node& node, std::string_view field,
                               std::string_view what) const;

  // A list of such names, none given twice.
  Result<std::vector<std::string>> ReadNames(const YAML::Node& list, std::string_view field) const;
};

}  // namespace sluice::config

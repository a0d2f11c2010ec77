#include "config/config_fields.h"

#include <algorithm>
#include <charconv>

namespace sluice::config {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

Result<size_t> Fields::ReadMemorySize(const YAML::Node& node, std::string_view field) const {
  static constexpr std::pair<std::string_view, int> kUnits[] = {
      {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  const std::string text = node.IsScalar() ? node.Scalar() : std::string();
  const auto bad = [&](std::string_view why) {
    return report().At(node, Path(field),
                       "bad size '" + text + "': " + std::string(why) +
                           " (expected bytes, or a whole number of KiB, MiB, GiB or TiB, "
                           "e.g. 256MiB)");
  };
  if (!node.IsScalar()) return bad("not a single value");
  std::string_view digits = text;
  int shift = 0;
  for (const auto& [suffix, bits] : kUnits) {
    if (digits.ends_with(suffix)) {
      digits.remove_suffix(suffix.size());
      shift = bits;
      break;
    }
  }
  uint64_t count = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    return bad("not a whole number with a unit");
  }
  if (count > (kMaxMaxMemory >> shift) || (count << shift) < kMinMaxMemory) {
    return bad("must be between 1MiB and 1TiB");
  }
  return static_cast<size_t>(count << shift);
}

Result<size_t> Fields::ReadWaitersBound(const YAML::Node& node, std::string_view field) const {
  auto n = ReadInteger(node, field);
  if (!n.ok()) return n.status();
  if (*n < 1 || static_cast<uint64_t>(*n) > kMaxWaitersBound) {
    return report().At(node, Path(field),
                       "must be between 1 and " + std::to_string(kMaxWaitersBound));
  }
  return static_cast<size_t>(*n);
}

Result<std::string> Fields::ReadName(const YAML::Node& node, std::string_view field,
                                     std::string_view what) const {
  auto name = ReadString(node, field);
  if (!name.ok()) return name.status();
  if (name->empty() || name->size() > kMaxRuleNameBytes ||
      !std::all_of(name->begin(), name->end(), IsNameChar)) {
    return report().At(node, Path(field),
                       "'" + *name + "' is not a " + std::string(what) + ": 1 to " +
                           std::to_string(kMaxRuleNameBytes) +
                           " characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'");
  }
  return name;
}

Result<std::vector<std::string>> Fields::ReadNames(const YAML::Node& list,
                                                   std::string_view field) const {
  if (!list.IsSequence()) return report().At(list, Path(field), "expected a list of names");
  std::vector<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item = std::string(field) + "[" + std::to_string(i) + "]";
    auto name = ReadName(list[i], item, "name");
    if (!name.ok()) return name.status();
    if (std::find(names.begin(), names.end(), *name) != names.end()) {
      return report().At(list[i], Path(item), "'" + *name + "' given twice");
    }
    names.push_back(std::move(*name));
  }
  return names;
}

}  // namespace sluice::config

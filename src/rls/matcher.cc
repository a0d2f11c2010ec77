// The descriptor matcher: the configuration flattened into per-level hash maps, walked once per
// request descriptor (see matcher.h for the rules it follows).
#include "rls/matcher.h"

#include <functional>
#include <unordered_map>
#include <utility>

namespace sluice::rls {

namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
// Composite key ("key" or "key_value") to node index; found by string_view, without a copy.
using CompositeMap = std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>>;

// A wildcard value split on '*' once: "a*b*" is {"a", "b", ""}.
struct Wildcard {
  std::vector<std::string> parts;
  uint32_t node;
};

std::vector<std::string> SplitOnStar(std::string_view pattern) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t star = pattern.find('*'); star != std::string_view::npos;
       star = pattern.find('*', start)) {
    parts.emplace_back(pattern.substr(start, star - start));
    start = star + 1;
  }
  parts.emplace_back(pattern.substr(start));
  return parts;
}

// Whether `text` is parts[0] + anything + parts[1] + anything + ... + parts[n-1], each '*'
// matching any run of characters (possibly none), the middle parts taken leftmost first.
bool WildcardMatches(const std::vector<std::string>& parts, std::string_view text) {
  const std::string& first = parts.front();
  const std::string& last = parts.back();
  if (parts.size() == 1) return text == first;
  if (!text.starts_with(first) || !text.ends_with(last)) return false;
  size_t fixed = 0;
  for (const std::string& part : parts) fixed += part.size();
  if (text.size() < fixed) return false;
  std::string_view middle = text.substr(first.size(), text.size() - first.size() - last.size());
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    const size_t at = middle.find(parts[i]);
    if (at == std::string_view::npos) return false;
    middle.remove_prefix(at + parts[i].size());
  }
  return true;
}

}  // namespace

struct MatcherNode {
  const Descriptor* descriptor = nullptr;  // null for a domain's root
  std::string composite;                   // "key" or "key_value"; the pattern for a wildcard
  CompositeMap children;
  std::vector<Wildcard> wildcards;  // in the file's order
};

struct Matcher::Index {
  Config config;
  std::vector<MatcherNode> nodes;
  CompositeMap domains;  // domain to its root node

  Status AddChildren(uint32_t parent, const std::vector<Descriptor>& descriptors) {
    for (const Descriptor& d : descriptors) {
      const auto index = static_cast<uint32_t>(nodes.size());
      MatcherNode& node = nodes.emplace_back();
      node.descriptor = &d;
      node.composite = d.value.empty() ? d.key : d.key + "_" + d.value;
      if (!nodes[parent].children.emplace(node.composite, index).second) {
        return Status::InvalidArgument("duplicate descriptor composite key '" + d.full_key + "'");
      }
      if (nodes[index].composite.find('*') != std::string::npos) {
        nodes[parent].wildcards.push_back({SplitOnStar(nodes[index].composite), index});
      }
      if (Status s = AddChildren(index, d.descriptors); !s.ok()) return s;
    }
    return Status::Ok();
  }
};

std::span<const RateLimitSpec> Match::limits() const {
  if (kind != MatchKind::kLimited) return {};
  if (override_limit) return {&*override_limit, 1};
  return descriptor->rule->limits;
}

Result<Matcher> Matcher::Create(Config config) {
  auto index = std::make_unique<Index>();
  index->config = std::move(config);
  for (const DomainConfig& domain : index->config.domains) {
    const auto root = static_cast<uint32_t>(index->nodes.size());
    index->nodes.emplace_back();
    if (!index->domains.emplace(domain.domain, root).second) {
      return Status::InvalidArgument("duplicate domain '" + domain.domain + "'");
    }
    if (Status s = index->AddChildren(root, domain.descriptors); !s.ok()) return s;
  }
  return Matcher(std::move(index));
}

Matcher::Matcher(std::unique_ptr<Index> index) : index_(std::move(index)) {}
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;
Matcher::~Matcher() = default;

bool Matcher::HasDomain(std::string_view domain) const {
  return index_->domains.find(domain) != index_->domains.end();
}

const Config& Matcher::config() const { return index_->config; }

namespace {

// The configured value a wildcard level stands for: the pattern less its "key_" when the entry's
// key starts it (that service's strings.TrimPrefix).
std::string_view PatternValue(const MatcherNode& node, std::string_view key) {
  std::string_view pattern = node.composite;
  if (pattern.size() > key.size() && pattern.starts_with(key) && pattern[key.size()] == '_') {
    pattern.remove_prefix(key.size() + 1);
  }
  return pattern;
}

bool SharesThreshold(const MatchKeys::Step& step) {
  return step.how == MatchedBy::kWildcard && step.node->descriptor->share_threshold;
}

void AppendKeyValue(std::string& out, std::string_view key, std::string_view value) {
  out += key;
  if (!value.empty()) {
    out += '_';
    out += value;
  }
}

// The counter key: "domain_" then "key_value_" per entry, a shared wildcard's pattern for value.
void WriteCounterKey(std::string_view domain, std::span<const DescriptorEntry> entries,
                     MatchKeys& keys) {
  keys.counter.assign(domain);
  keys.counter += '_';
  for (size_t i = 0; i < entries.size(); ++i) {
    const bool shared = !keys.steps.empty() && SharesThreshold(keys.steps[i]);
    keys.counter += entries[i].key;
    keys.counter += '_';
    keys.counter += shared ? PatternValue(*keys.steps[i].node, entries[i].key) : entries[i].value;
    keys.counter += '_';
  }
}

// That service's stats name for a configured match.
void WriteStatsKey(std::string_view domain, std::span<const DescriptorEntry> entries,
                   const Descriptor& leaf, MatchKeys& keys) {
  keys.stats.assign(domain);
  bool any_shared = false;
  for (const MatchKeys::Step& step : keys.steps) any_shared = any_shared || SharesThreshold(step);
  for (size_t i = 0; i < entries.size(); ++i) {
    const MatchKeys::Step& step = keys.steps[i];
    const DescriptorEntry& entry = entries[i];
    keys.stats += '.';
    if (leaf.detailed_metric) {
      if (SharesThreshold(step)) {
        AppendKeyValue(keys.stats, entry.key, PatternValue(*step.node, entry.key));
      } else if (any_shared) {
        AppendKeyValue(keys.stats, entry.key, entry.value);
      } else {
        // Every value, even an empty one, as "key_value".
        keys.stats += entry.key;
        keys.stats += '_';
        keys.stats += entry.value;
      }
      continue;
    }
    std::string_view value;
    switch (step.how) {
      case MatchedBy::kExact:
        value = entry.value;
        break;
      case MatchedBy::kWildcard:
        value = step.node->descriptor->value_to_metric && !SharesThreshold(step)
                    ? entry.value
                    : PatternValue(*step.node, entry.key);
        break;
      case MatchedBy::kKey:
        if (step.node->descriptor->value_to_metric) value = entry.value;
        break;
    }
    AppendKeyValue(keys.stats, entry.key, value);
  }
}

}  // namespace

Result<Match> Matcher::Find(std::string_view domain, std::span<const DescriptorEntry> entries,
                            const std::optional<LimitOverride>& override_limit,
                            MatchKeys& keys) const {
  keys.steps.clear();
  const auto root = index_->domains.find(domain);
  if (root == index_->domains.end()) return Match{};

  if (override_limit) {
    const std::optional<Unit> unit = UnitFromNumber(override_limit->unit);
    if (!unit) {
      return Status::InvalidArgument("the descriptor's limit override has no unit (got " +
                                     std::to_string(override_limit->unit) + ")");
    }
    Match match;
    match.kind = MatchKind::kLimited;
    RateLimitSpec& spec = match.override_limit.emplace();
    spec.requests_per_unit = override_limit->requests_per_unit;
    spec.unit = *unit;
    if (spec.requests_per_unit > 0) {
      auto limit =
          Limit::Create(Algorithm::kFixedWindow, spec.requests_per_unit, UnitDuration(*unit));
      if (!limit.ok()) {
        return Status::InvalidArgument("the descriptor's limit override: " +
                                       limit.status().message());
      }
      spec.limit = *limit;
    }
    WriteCounterKey(domain, entries, keys);
    // That service names an override's stats "domain.key1_value1.key2_value2".
    keys.stats.assign(domain);
    for (const DescriptorEntry& entry : entries) {
      keys.stats += '.';
      AppendKeyValue(keys.stats, entry.key, entry.value);
    }
    return match;
  }

  const MatcherNode* level = &index_->nodes[root->second];
  for (size_t i = 0; i < entries.size(); ++i) {
    const DescriptorEntry& entry = entries[i];
    keys.composite.assign(entry.key);
    keys.composite += '_';
    keys.composite += entry.value;
    const MatcherNode* next = nullptr;
    MatchedBy how = MatchedBy::kExact;
    if (auto it = level->children.find(std::string_view(keys.composite));
        it != level->children.end()) {
      next = &index_->nodes[it->second];
    } else {
      for (const Wildcard& wildcard : level->wildcards) {
        if (WildcardMatches(wildcard.parts, keys.composite)) {
          next = &index_->nodes[wildcard.node];
          how = MatchedBy::kWildcard;
          break;
        }
      }
      if (next == nullptr) {
        if (auto it = level->children.find(entry.key); it != level->children.end()) {
          next = &index_->nodes[it->second];
          how = MatchedBy::kKey;
        }
      }
    }
    if (next == nullptr) return Match{};
    keys.steps.push_back({next, how});
    // More entries than the tree is deep: no limit.
    if (i + 1 < entries.size() && next->children.empty()) return Match{};
    level = next;
  }
  if (keys.steps.empty()) return Match{};
  const Descriptor& leaf = *keys.steps.back().node->descriptor;
  if (!leaf.rule) return Match{};
  Match match;
  match.kind = leaf.rule->unlimited ? MatchKind::kUnlimited : MatchKind::kLimited;
  match.descriptor = &leaf;
  WriteCounterKey(domain, entries, keys);
  WriteStatsKey(domain, entries, leaf, keys);
  return match;
}

void ApplyReplaces(std::span<Match> matches) {
  const auto is_replaced = [&](const std::string& name) {
    for (const Match& other : matches) {
      if (other.descriptor == nullptr || (other.kind == MatchKind::kNoLimit && !other.replaced)) {
        continue;
      }
      for (const std::string& replaced : other.descriptor->rule->replaces) {
        if (replaced == name) return true;
      }
    }
    return false;
  };
  // Marked first and dropped after, so a dropped rule's own replaces still count.
  for (Match& match : matches) {
    if (match.kind != MatchKind::kLimited || match.descriptor == nullptr) continue;
    for (const RateLimitSpec& spec : match.descriptor->rule->limits) {
      if (!spec.name.empty() && is_replaced(spec.name)) {
        match.replaced = true;
        break;
      }
    }
  }
  for (Match& match : matches) {
    if (match.replaced) match.kind = MatchKind::kNoLimit;
  }
}

}  // namespace sluice::rls

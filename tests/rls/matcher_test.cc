// The descriptor matcher against envoyproxy/ratelimit's documented behaviour: the README's
// examples (rewritten here with other names), its precedence rules (exact value, then wildcards in
// file order, then key alone; no backtracking; the request's depth must equal the tree's), limit
// overrides, replaces, and the counter and stats keys it builds.
#include "rls/matcher.h"

#include <gtest/gtest.h>

#include <chrono>

#include "matcher_from.h"

namespace sluice::rls {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

Matcher Build(std::initializer_list<std::string_view> files) { return MatcherFrom(files); }

struct Found {
  Match match;
  std::string counter;
  std::string stats;

  MatchKind kind() const { return match.kind; }
  // The one limit's requests per unit.
  uint32_t requests() const {
    EXPECT_EQ(match.limits().size(), 1u);
    return match.limits().empty() ? 0 : match.limits()[0].requests_per_unit;
  }
  std::string full_key() const {
    return match.descriptor != nullptr ? match.descriptor->full_key : "";
  }
};

Found Find(const Matcher& matcher, std::string_view domain, std::vector<DescriptorEntry> entries,
           std::optional<LimitOverride> override_limit = std::nullopt) {
  MatchKeys keys;
  auto match = matcher.Find(domain, entries, override_limit, keys);
  EXPECT_TRUE(match.ok()) << match.status().ToString();
  if (!match.ok()) return {};
  Found found{.match = *match, .counter = "", .stats = ""};
  if (match->kind != MatchKind::kNoLimit) {
    found.counter = keys.counter;
    found.stats = keys.stats;
  }
  return found;
}

// README example 1: limits on exact values only.
TEST(RlsMatcher, ExactValues) {
  const Matcher m = Build({R"(
domain: catalog_qps
descriptors:
  - key: table
    value: orders
    rate_limit: {unit: second, requests_per_unit: 400}
  - key: table
    value: fallback
    rate_limit: {unit: second, requests_per_unit: 300}
)"});
  Found orders = Find(m, "catalog_qps", {{"table", "orders"}});
  EXPECT_EQ(orders.kind(), MatchKind::kLimited);
  EXPECT_EQ(orders.requests(), 400u);
  EXPECT_EQ(orders.full_key(), "catalog_qps.table_orders");
  EXPECT_EQ(orders.counter, "catalog_qps_table_orders_");
  EXPECT_EQ(orders.stats, "catalog_qps.table_orders");
  EXPECT_EQ(Find(m, "catalog_qps", {{"table", "fallback"}}).requests(), 300u);
  EXPECT_EQ(Find(m, "catalog_qps", {{"table", "users"}}).kind(), MatchKind::kNoLimit);
  EXPECT_EQ(Find(m, "catalog_qps", {{"tables", "orders"}}).kind(), MatchKind::kNoLimit);
  EXPECT_EQ(Find(m, "other_domain", {{"table", "orders"}}).kind(), MatchKind::kNoLimit);
  EXPECT_EQ(Find(m, "catalog_qps", {}).kind(), MatchKind::kNoLimit);
  EXPECT_TRUE(m.HasDomain("catalog_qps"));
  EXPECT_FALSE(m.HasDomain("other_domain"));
}

// README example 2: a nested descriptor, and a key without a value counting each value apart.
TEST(RlsMatcher, NestedAndKeyOnly) {
  const Matcher m = Build({R"(
domain: notify
descriptors:
  - key: channel
    value: promo
    descriptors:
      - key: recipient
        rate_limit: {unit: day, requests_per_unit: 3}
  - key: recipient
    rate_limit: {unit: day, requests_per_unit: 50}
)"});
  Found promo = Find(m, "notify", {{"channel", "promo"}, {"recipient", "555-0100"}});
  EXPECT_EQ(promo.requests(), 3u);
  EXPECT_EQ(promo.full_key(), "notify.channel_promo.recipient");
  EXPECT_EQ(promo.counter, "notify_channel_promo_recipient_555-0100_");
  EXPECT_EQ(promo.stats, "notify.channel_promo.recipient");
  // Each value of a key-only descriptor has a counter of its own.
  EXPECT_EQ(Find(m, "notify", {{"channel", "promo"}, {"recipient", "555-0199"}}).counter,
            "notify_channel_promo_recipient_555-0199_");
  Found any = Find(m, "notify", {{"recipient", "555-0100"}});
  EXPECT_EQ(any.requests(), 50u);
  EXPECT_EQ(any.counter, "notify_recipient_555-0100_");
  EXPECT_EQ(any.stats, "notify.recipient");
  // The placeholder level has no limit of its own; another channel matches nothing.
  EXPECT_EQ(Find(m, "notify", {{"channel", "promo"}}).kind(), MatchKind::kNoLimit);
  EXPECT_EQ(Find(m, "notify", {{"channel", "receipt"}, {"recipient", "1"}}).kind(),
            MatchKind::kNoLimit);
}

// README example 3: a key's exact value is tried before the key alone; 0 denies everything.
TEST(RlsMatcher, ExactValueBeforeKeyOnly) {
  const Matcher m = Build({R"(
domain: edge
descriptors:
  - key: client_ip
    rate_limit: {unit: second, requests_per_unit: 20}
  - key: client_ip
    value: 203.0.113.9
    rate_limit: {unit: second, requests_per_unit: 0}
)"});
  Found blocked = Find(m, "edge", {{"client_ip", "203.0.113.9"}});
  EXPECT_EQ(blocked.kind(), MatchKind::kLimited);
  EXPECT_EQ(blocked.requests(), 0u);
  EXPECT_FALSE(blocked.match.limits()[0].limit.has_value());
  Found other = Find(m, "edge", {{"client_ip", "198.51.100.1"}});
  EXPECT_EQ(other.requests(), 20u);
  EXPECT_EQ(other.match.limits()[0].limit->count(), 20);
  EXPECT_EQ(other.match.limits()[0].limit->period(), seconds(1));
}

// README example 4: the request's entries must reach exactly the depth of a rate limit.
TEST(RlsMatcher, DepthMustMatch) {
  const Matcher shallow = Build({R"(
domain: depth
descriptors:
  - key: k
    value: v
    rate_limit: {unit: second, requests_per_unit: 300}
)"});
  EXPECT_EQ(Find(shallow, "depth", {{"k", "v"}, {"sub", "x"}}).kind(), MatchKind::kNoLimit);
  EXPECT_EQ(Find(shallow, "depth", {{"k", "v"}}).requests(), 300u);

  const Matcher deep = Build({R"(
domain: depth
descriptors:
  - key: k
    value: v
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: sub
        rate_limit: {unit: second, requests_per_unit: 300}
)"});
  EXPECT_EQ(Find(deep, "depth", {{"k", "v"}, {"sub", "x"}}).requests(), 300u);
  EXPECT_EQ(Find(deep, "depth", {{"k", "v"}}).requests(), 1u);
  EXPECT_EQ(Find(deep, "depth", {{"k", "v"}, {"sub", "x"}, {"more", "y"}}).kind(),
            MatchKind::kNoLimit);
}

// README example 5: unlimited descriptors are matched but not counted.
TEST(RlsMatcher, Unlimited) {
  const Matcher m = Build({R"(
domain: internal
descriptors:
  - key: backup
    rate_limit: {unlimited: true}
  - key: batch
    rate_limit: {unit: minute, requests_per_unit: 100}
)"});
  Found backup = Find(m, "internal", {{"backup", "nightly"}});
  EXPECT_EQ(backup.kind(), MatchKind::kUnlimited);
  EXPECT_TRUE(backup.match.limits().empty());
  EXPECT_EQ(backup.full_key(), "internal.backup");
  Found batch = Find(m, "internal", {{"batch", "x"}});
  EXPECT_EQ(batch.requests(), 100u);
  EXPECT_EQ(batch.match.limits()[0].limit->period(), minutes(1));
}

// README example 6: shadow_mode belongs to the descriptor that matched.
TEST(RlsMatcher, ShadowMode) {
  const Matcher m = Build({R"(
domain: soft_launch
descriptors:
  - key: service
    descriptors:
      - key: user
        value: alice
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 10}
      - key: user
        value: bob
        rate_limit: {unit: second, requests_per_unit: 20}
)"});
  Found alice = Find(m, "soft_launch", {{"service", "auth"}, {"user", "alice"}});
  EXPECT_TRUE(alice.match.shadow_mode());
  EXPECT_EQ(alice.requests(), 10u);
  Found bob = Find(m, "soft_launch", {{"service", "auth"}, {"user", "bob"}});
  EXPECT_FALSE(bob.match.shadow_mode());
  EXPECT_EQ(bob.requests(), 20u);
}

// README example 7: a rule that replaces another by name drops it from the same request.
TEST(RlsMatcher, Replaces) {
  const Matcher m = Build({R"(
domain: tiers
descriptors:
  - key: plan
    value: basic
    descriptors:
      - key: account
        value: acme
        rate_limit: {name: acme_basic, unit: second, requests_per_unit: 5}
  - key: region
    value: eu
    descriptors:
      - key: account
        value: acme
        rate_limit: {replaces: [{name: acme_basic}], unit: second, requests_per_unit: 10}
  - key: vip
    rate_limit: {unlimited: true, replaces: [{name: acme_basic}]}
  - key: pair
    rate_limits:
      - {unit: second, requests_per_unit: 1, name: pair_fast}
      - {unit: hour, requests_per_unit: 9, name: pair_slow}
  - key: drop_pair
    rate_limit: {unit: second, requests_per_unit: 2, replaces: [{name: pair_slow}]}
)"});
  const std::vector<DescriptorEntry> basic = {{"plan", "basic"}, {"account", "acme"}};
  const std::vector<DescriptorEntry> eu = {{"region", "eu"}, {"account", "acme"}};

  std::vector<Match> alone = {Find(m, "tiers", basic).match};
  ApplyReplaces(alone);
  EXPECT_EQ(alone[0].kind, MatchKind::kLimited);
  EXPECT_EQ(alone[0].limits()[0].requests_per_unit, 5u);

  std::vector<Match> both = {Find(m, "tiers", basic).match, Find(m, "tiers", eu).match};
  ApplyReplaces(both);
  EXPECT_EQ(both[0].kind, MatchKind::kNoLimit);
  EXPECT_TRUE(both[0].replaced);
  EXPECT_TRUE(both[0].limits().empty());
  EXPECT_EQ(both[1].kind, MatchKind::kLimited);
  EXPECT_EQ(both[1].limits()[0].requests_per_unit, 10u);
  ApplyReplaces(both);  // a second pass changes nothing
  EXPECT_EQ(both[0].kind, MatchKind::kNoLimit);
  EXPECT_EQ(both[1].kind, MatchKind::kLimited);

  // An unlimited rule's replaces count too.
  std::vector<Match> vip = {Find(m, "tiers", basic).match, Find(m, "tiers", {{"vip", "1"}}).match};
  ApplyReplaces(vip);
  EXPECT_EQ(vip[0].kind, MatchKind::kNoLimit);
  EXPECT_EQ(vip[1].kind, MatchKind::kUnlimited);

  // A rule of several limits goes whole when one of its names is replaced.
  std::vector<Match> pair = {Find(m, "tiers", {{"pair", "p"}}).match,
                             Find(m, "tiers", {{"drop_pair", "d"}}).match};
  EXPECT_EQ(pair[0].limits().size(), 2u);
  ApplyReplaces(pair);
  EXPECT_EQ(pair[0].kind, MatchKind::kNoLimit);
  EXPECT_EQ(pair[1].kind, MatchKind::kLimited);

  // An override has no name and is never replaced.
  std::vector<Match> with_override = {
      Find(m, "tiers", basic, LimitOverride{.requests_per_unit = 3, .unit = 1}).match,
      Find(m, "tiers", eu).match};
  ApplyReplaces(with_override);
  EXPECT_EQ(with_override[0].kind, MatchKind::kLimited);
}

// README example 8: detailed_metric names the stats by the request's values.
TEST(RlsMatcher, DetailedMetricStatsKey) {
  const Matcher m = Build({R"(
domain: dm
descriptors:
  - key: tenant
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: tenant
    value: t1
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 10}
)"});
  EXPECT_EQ(Find(m, "dm", {{"tenant", "zeta"}}).stats, "dm.tenant_zeta");
  EXPECT_EQ(Find(m, "dm", {{"tenant", "t1"}}).stats, "dm.tenant_t1");
  EXPECT_EQ(Find(m, "dm", {{"tenant", ""}}).stats, "dm.tenant_");
  EXPECT_EQ(Find(m, "dm", {{"plain", "zeta"}}).stats, "dm.plain");
  EXPECT_EQ(Find(m, "dm", {{"plain", "zeta"}}).counter, "dm_plain_zeta_");
}

// README example 9: '*' matches any run of characters, at the end, in the middle, or several.
TEST(RlsMatcher, Wildcards) {
  const Matcher m = Build({R"(
domain: wc
descriptors:
  - key: sku
    value: promo*
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value: /v1/*/edit
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: route
    value: /a/*/b/*/c
    rate_limit: {unit: minute, requests_per_unit: 3}
)"});
  Found promo = Find(m, "wc", {{"sku", "promo42"}});
  EXPECT_EQ(promo.requests(), 1u);
  EXPECT_EQ(promo.counter, "wc_sku_promo42_");  // the request's own value
  EXPECT_EQ(promo.stats, "wc.sku_promo*");
  EXPECT_EQ(Find(m, "wc", {{"sku", "promo"}}).requests(), 1u);
  EXPECT_EQ(Find(m, "wc", {{"sku", "prom"}}).kind(), MatchKind::kNoLimit);
  EXPECT_EQ(Find(m, "wc", {{"sku", "xpromo"}}).kind(), MatchKind::kNoLimit);

  EXPECT_EQ(Find(m, "wc", {{"path", "/v1/123/edit"}}).requests(), 2u);
  EXPECT_EQ(Find(m, "wc", {{"path", "/v1//edit"}}).requests(), 2u);
  EXPECT_EQ(Find(m, "wc", {{"path", "/v1/123/view"}}).kind(), MatchKind::kNoLimit);
  EXPECT_EQ(Find(m, "wc", {{"path", "/v1/edit"}}).kind(), MatchKind::kNoLimit);

  EXPECT_EQ(Find(m, "wc", {{"route", "/a/1/b/2/c"}}).requests(), 3u);
  EXPECT_EQ(Find(m, "wc", {{"route", "/a/x/y/b/z/c"}}).requests(), 3u);
  EXPECT_EQ(Find(m, "wc", {{"route", "/a/1/c/2/b"}}).kind(), MatchKind::kNoLimit);
  EXPECT_EQ(Find(m, "wc", {{"route", "/a/b/c"}}).kind(), MatchKind::kNoLimit);
}

// README example 10: value_to_metric puts the request's value in the stats name.
TEST(RlsMatcher, ValueToMetricStatsKey) {
  const Matcher m = Build({R"(
domain: v2m
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        value_to_metric: true
        descriptors:
          - key: subject
            rate_limit: {unit: minute, requests_per_unit: 60}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 100}
)",
                           R"(
domain: plain
descriptors:
  - key: route
    descriptors:
      - key: method
        descriptors:
          - key: subject
            rate_limit: {unit: minute, requests_per_unit: 60}
)"});
  EXPECT_EQ(Find(m, "v2m", {{"route", "checkout"}, {"method", "POST"}, {"subject", "s1"}}).stats,
            "v2m.route_checkout.method_POST.subject");
  EXPECT_EQ(Find(m, "plain", {{"route", "checkout"}, {"method", "POST"}, {"subject", "s1"}}).stats,
            "plain.route.method.subject");
  EXPECT_EQ(Find(m, "v2m", {{"user", "ann"}, {"action", "readfile"}, {"resource", "docs"}}).stats,
            "v2m.user_ann.action_readfile.resource");
}

// README example 11: share_threshold gives every match of a wildcard one counter.
TEST(RlsMatcher, ShareThreshold) {
  const Matcher m = Build({R"(
domain: sh
descriptors:
  - key: doc
    value: docs/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: doc_private
    value: priv/*
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: bucket
    value: b*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: object
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 60}
)"});
  Found a = Find(m, "sh", {{"doc", "docs/a.pdf"}});
  Found b = Find(m, "sh", {{"doc", "docs/b.csv"}});
  EXPECT_EQ(a.counter, "sh_doc_docs/*_");
  EXPECT_EQ(a.counter, b.counter);
  EXPECT_EQ(a.stats, "sh.doc_docs/*");
  EXPECT_NE(Find(m, "sh", {{"doc_private", "priv/a"}}).counter,
            Find(m, "sh", {{"doc_private", "priv/b"}}).counter);
  // Shared at an ancestor level: the pattern stands in for that level's value only.
  Found object = Find(m, "sh", {{"bucket", "b1"}, {"object", "x.png"}});
  EXPECT_EQ(object.counter, "sh_bucket_b*_object_x.png_");
  EXPECT_EQ(object.stats, "sh.bucket_b*.object_x.png");
  EXPECT_EQ(object.counter, Find(m, "sh", {{"bucket", "b2"}, {"object", "x.png"}}).counter);
}

TEST(RlsMatcher, PrecedenceExactThenWildcardThenKey) {
  const Matcher m = Build({R"(
domain: p
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: k
    value: a*
    rate_limit: {unit: second, requests_per_unit: 20}
  - key: k
    value: abc
    rate_limit: {unit: second, requests_per_unit: 30}
)"});
  EXPECT_EQ(Find(m, "p", {{"k", "abc"}}).requests(), 30u);
  EXPECT_EQ(Find(m, "p", {{"k", "abd"}}).requests(), 20u);
  EXPECT_EQ(Find(m, "p", {{"k", "xyz"}}).requests(), 10u);
  // An empty value is "k_", which no value matches: the key alone does.
  EXPECT_EQ(Find(m, "p", {{"k", ""}}).requests(), 10u);
}

TEST(RlsMatcher, FirstWildcardInFileOrderWins) {
  const Matcher ab = Build({R"(
domain: p
descriptors:
  - {key: k, value: a*, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: k, value: ab*, rate_limit: {unit: second, requests_per_unit: 2}}
)"});
  EXPECT_EQ(Find(ab, "p", {{"k", "abc"}}).requests(), 1u);
  const Matcher ba = Build({R"(
domain: p
descriptors:
  - {key: k, value: ab*, rate_limit: {unit: second, requests_per_unit: 2}}
  - {key: k, value: a*, rate_limit: {unit: second, requests_per_unit: 1}}
)"});
  EXPECT_EQ(Find(ba, "p", {{"k", "abc"}}).requests(), 2u);
  EXPECT_EQ(Find(ba, "p", {{"k", "axc"}}).requests(), 1u);
}

TEST(RlsMatcher, NoBacktrackingAfterALevelMatched) {
  // (a, 1) matches "a_1"; its children lack b=3, so there is no limit, although the key-only
  // branch "a" has one for b=3: that service never goes back up a level.
  const Matcher m = Build({R"(
domain: p
descriptors:
  - key: a
    value: "1"
    descriptors:
      - {key: b, value: "2", rate_limit: {unit: second, requests_per_unit: 1}}
  - key: a
    descriptors:
      - {key: b, value: "3", rate_limit: {unit: second, requests_per_unit: 2}}
)"});
  EXPECT_EQ(Find(m, "p", {{"a", "1"}, {"b", "2"}}).requests(), 1u);
  EXPECT_EQ(Find(m, "p", {{"a", "1"}, {"b", "3"}}).kind(), MatchKind::kNoLimit);
  EXPECT_EQ(Find(m, "p", {{"a", "9"}, {"b", "3"}}).requests(), 2u);
}

TEST(RlsMatcher, WildcardLevelsNest) {
  const Matcher m = Build({R"(
domain: p
descriptors:
  - key: tenant
    value: team-*
    descriptors:
      - {key: op, value: write, rate_limit: {unit: second, requests_per_unit: 4}}
)"});
  Found found = Find(m, "p", {{"tenant", "team-red"}, {"op", "write"}});
  EXPECT_EQ(found.requests(), 4u);
  EXPECT_EQ(found.full_key(), "p.tenant_team-*.op_write");
  EXPECT_EQ(found.counter, "p_tenant_team-red_op_write_");
  EXPECT_EQ(Find(m, "p", {{"tenant", "team-red"}, {"op", "read"}}).kind(), MatchKind::kNoLimit);
}

TEST(RlsMatcher, CompositeKeysAsThatServiceJoinsThem) {
  // Entries are looked up as "key_value": a key-only "user_id" is also what (user, id) makes.
  const Matcher m = Build({R"(
domain: p
descriptors:
  - {key: user_id, rate_limit: {unit: second, requests_per_unit: 6}}
)"});
  EXPECT_EQ(Find(m, "p", {{"user_id", "42"}}).requests(), 6u);
  EXPECT_EQ(Find(m, "p", {{"user", "id"}}).requests(), 6u);
}

TEST(RlsMatcher, WhitelistedDescriptorHasNoLimit) {
  const Matcher m = Build({R"(
domain: p
descriptors:
  - {key: health_check}
)"});
  EXPECT_EQ(Find(m, "p", {{"health_check", "x"}}).kind(), MatchKind::kNoLimit);
}

TEST(RlsMatcher, SeveralLimitsOnOneDescriptor) {
  const Matcher m = Build({R"(
domain: p
descriptors:
  - key: api_key
    rate_limits:
      - {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 30}
      - {unit: day, requests_per_unit: 10000}
)"});
  Found found = Find(m, "p", {{"api_key", "k1"}});
  ASSERT_EQ(found.match.limits().size(), 2u);
  EXPECT_EQ(*found.match.limits()[0].limit, *Limit::Create(Algorithm::kGcra, 10, seconds(1), 30));
  EXPECT_EQ(*found.match.limits()[1].limit,
            *Limit::Create(Algorithm::kFixedWindow, 10000, hours(24)));
}

TEST(RlsMatcher, LimitOverride) {
  const Matcher m = Build({R"(
domain: p
descriptors:
  - key: k
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra}
)"});
  // The override wins over the configuration, with a fixed window and no shadow mode, and needs
  // no configured descriptor, only the domain.
  Found found = Find(m, "p", {{"k", "v"}, {"x", ""}}, LimitOverride{7, 2});
  EXPECT_EQ(found.kind(), MatchKind::kLimited);
  EXPECT_EQ(found.match.descriptor, nullptr);
  EXPECT_FALSE(found.match.shadow_mode());
  ASSERT_EQ(found.match.limits().size(), 1u);
  EXPECT_EQ(found.match.limits()[0].unit, Unit::kMinute);
  EXPECT_EQ(*found.match.limits()[0].limit, *Limit::Create(Algorithm::kFixedWindow, 7, minutes(1)));
  EXPECT_EQ(found.counter, "p_k_v_x__");
  EXPECT_EQ(found.stats, "p.k_v.x");
  EXPECT_EQ(Find(m, "elsewhere", {{"k", "v"}}, LimitOverride{7, 2}).kind(), MatchKind::kNoLimit);
  EXPECT_FALSE(Find(m, "p", {{"k", "v"}}, LimitOverride{0, 3}).match.limits()[0].limit);
  EXPECT_EQ(Find(m, "p", {{"k", "v"}}, LimitOverride{1, 7}).match.limits()[0].unit, Unit::kWeek);

  MatchKeys keys;
  const std::vector<DescriptorEntry> entries = {{"k", "v"}};
  auto unknown_unit = m.Find("p", entries, LimitOverride{5, 0}, keys);
  ASSERT_FALSE(unknown_unit.ok());
  EXPECT_EQ(unknown_unit.status().message(), "the descriptor's limit override has no unit (got 0)");
  EXPECT_FALSE(m.Find("p", entries, LimitOverride{5, 8}, keys).ok());
  auto too_many = m.Find("p", entries, LimitOverride{2'000'000'000, 1}, keys);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("above the maximum"), std::string::npos);
}

TEST(RlsMatcher, CreateRefusesDuplicates) {
  Config config;
  config.domains.push_back(DomainConfig{.domain = "d", .file = "a.yaml", .descriptors = {}});
  config.domains.push_back(DomainConfig{.domain = "d", .file = "b.yaml", .descriptors = {}});
  EXPECT_FALSE(Matcher::Create(config).ok());

  Config twins;
  Descriptor k;
  k.key = "k";
  k.full_key = "d.k";
  twins.domains.push_back(DomainConfig{.domain = "d", .file = "a.yaml", .descriptors = {k, k}});
  auto matcher = Matcher::Create(twins);
  ASSERT_FALSE(matcher.ok());
  EXPECT_EQ(matcher.status().message(), "duplicate descriptor composite key 'd.k'");
}

TEST(RlsMatcher, MovedMatcherStillMatches) {
  Matcher m =
      Build({"domain: p\ndescriptors: [{key: k, rate_limit: {unit: second, "
             "requests_per_unit: 3}}]\n"});
  Matcher moved = std::move(m);
  EXPECT_EQ(Find(moved, "p", {{"k", "v"}}).requests(), 3u);
  EXPECT_EQ(moved.config().domains[0].domain, "p");
}

}  // namespace
}  // namespace sluice::rls

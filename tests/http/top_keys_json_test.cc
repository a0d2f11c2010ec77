#include "http/top_keys_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::http {
namespace {

using nlohmann::json;

TEST(TopQueryTest, ReadsRuleAndCount) {
  auto all = ParseTopQuery("", 64);
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->rule.has_value());
  EXPECT_EQ(all->n, kDefaultTopKeysShown);

  auto one = ParseTopQuery("rule=login%3Av2&n=64", 64);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->rule, "login:v2");
  EXPECT_EQ(one->n, 64u);

  auto spaced = ParseTopQuery("n=3&&rule=a+b", 64);
  ASSERT_TRUE(spaced.ok());
  EXPECT_EQ(spaced->rule, "a b");
  EXPECT_EQ(spaced->n, 3u);
}

TEST(TopQueryTest, RefusesWhatItCannotRead) {
  for (const char* query : {"n=0", "n=65", "n=", "n=1x", "n=-1", "n=1&n=2", "rule=a&rule=b",
                            "rule=", "rule=%zz", "rule=%4", "key=x", "n=99999999999999999999"}) {
    auto parsed = ParseTopQuery(query, 64);
    EXPECT_FALSE(parsed.ok()) << query;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << query;
  }
}

TEST(TopJsonTest, WritesTheReport) {
  TopKeysReport report;
  report.window = std::chrono::seconds(272) + std::chrono::milliseconds(900);
  report.denied = 1500;
  report.max_error = 23;
  report.keys = {{"user:42", 1200, 0}, {"user:7", 40, 23}};
  std::string out;
  AppendTopJson(out, "api", report);
  EXPECT_EQ(
      out,
      R"({"rule":"api","tracked":true,"window_s":272,"denied":1500,"max_error":23,"keys":[)"
      R"({"key":"user:42","denied":1200,"error":0},{"key":"user:7","denied":40,"error":23}]})");

  out.clear();
  TopKeysReport untracked;
  untracked.tracked = false;
  AppendTopJson(out, "quiet", untracked);
  EXPECT_EQ(out,
            R"({"rule":"quiet","tracked":false,"window_s":0,"denied":0,"max_error":0,"keys":[]})");
}

// Keys are whatever clients sent: the JSON must stay valid, ASCII, and give each key back.
TEST(TopJsonTest, EscapesKeysWhateverTheirBytes) {
  const std::string hostile[] = {
      "\"quoted\" \\ back",
      "</script><img src=x onerror=alert(1)>",
      std::string("nul\0byte", 8),
      "line\nbreak\ttab\x1b[31m",
      "bidi \u202e override, \u2028 separator, caf\u00e9, \U0001F600",
  };
  TopKeysReport report;
  for (const std::string& key : hostile) report.keys.push_back({key, 1, 0});
  const std::string invalid = "bad\xff\xfeutf8\xc3";
  report.keys.push_back({invalid, 1, 0});
  std::string out;
  AppendTopJson(out, "api", report);

  for (const char c : out) {
    EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f)
        << "non-ASCII or control byte " << int(static_cast<unsigned char>(c));
  }
  const json parsed = json::parse(out);
  const json& keys = parsed.at("keys");
  ASSERT_EQ(keys.size(), std::size(hostile) + 1);
  for (size_t i = 0; i < std::size(hostile); ++i) {
    EXPECT_EQ(keys[i].at("key").get<std::string>(), hostile[i]);
    EXPECT_FALSE(keys[i].contains("key_hex"));
  }
  const json& bad = keys.back();
  EXPECT_EQ(bad.at("key").get<std::string>(), "bad\ufffd\ufffdutf8\ufffd");
  EXPECT_EQ(bad.at("key_hex").get<std::string>(), "626164fffe75746638c3");
}

}  // namespace
}  // namespace sluice::http

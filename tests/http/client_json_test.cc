// The reader of a client's JSON (json/client_json.h): a key twice in one object, at any depth,
// is refused with the key named, and a long key is quoted cut short.
#include "json/client_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::json {
namespace {

TEST(ClientJson, AKeyTwiceInAnObjectIsRefusedNamingIt) {
  struct Case {
    std::string body;
    std::string key;
  };
  const std::vector<Case> cases = {
      {R"({"cost":1,"cost":0})", "cost"},
      {R"({"rule":"a","key":"k","cost":1,"key":"j"})", "key"},
      {R"({"checks":[{"rule":"a","key":"k"},{"rule":"a","key":"k","rule":"b"}]})", "rule"},
      {R"({"checks":[],"checks":[]})", "checks"},
      {R"({"a":{"b":[{"c":{"d":1,"d":1}}]}})", "d"},
      {R"([{"x":1},{"y":2,"y":3}])", "y"},
      // The same key however it is escaped: JSON readers compare what the escapes decode to.
      {R"({"cost":1,"co\u0073t":0})", "cost"},
      {R"({"":1,"":2})", ""},
  };
  for (const Case& c : cases) {
    const auto read = ReadClientJson(c.body);
    ASSERT_FALSE(read.ok()) << c.body;
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(read.status().message(),
              "duplicate key '" + c.key + "': each key may appear once in an object")
        << c.body;
  }
}

TEST(ClientJson, TheSameKeyInDifferentObjectsIsFine) {
  for (const std::string body :
       {R"({"a":{"x":1},"b":{"x":1},"x":{"x":{"x":1}}})",
        R"({"checks":[{"rule":"a","key":"k"},{"rule":"a","key":"k"}]})", R"([1,"a",{"a":1}])",
        R"({"rule":"api","key":"k","cost":0})", "7", R"("s")"}) {
    const auto read = ReadClientJson(body);
    ASSERT_TRUE(read.ok()) << body << ": " << read.status().message();
    EXPECT_EQ(*read, nlohmann::json::parse(body));
  }
}

TEST(ClientJson, ALongKeyIsQuotedCutShort) {
  const std::string key(100'000, 'k');
  const auto read = ReadClientJson(R"({")" + key + R"(":1,")" + key + R"(":2})");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(), "duplicate key '" + std::string(kMaxQuotedKeyBytes, 'k') +
                                         "...' (100000 bytes): each key may appear once in "
                                         "an object");
}

TEST(ClientJson, ManyKeysInOneObject) {
  std::string body = "{";
  for (int i = 0; i < 10'000; ++i) body += R"("k)" + std::to_string(i) + R"(":0,)";
  EXPECT_TRUE(ReadClientJson(body + R"("last":0})").ok());
  const auto twice = ReadClientJson(body + R"("k5000":1})");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("'k5000'"), std::string::npos);
}

TEST(ClientJson, WhatIsNotJsonIsRefusedAsMalformed) {
  for (const std::string body : {"", "{", R"({"a":1,})", "\"\xff\"", "1e999", "{\"a\":1}x"}) {
    const auto read = ReadClientJson(body);
    ASSERT_FALSE(read.ok()) << body;
    EXPECT_TRUE(read.status().message().starts_with("malformed JSON: ")) << read.status().message();
  }
}

TEST(ClientJson, AParseErrorQuotesLittleOfTheBody) {
  const auto read = ReadClientJson(R"({"key":")" + std::string(60'000, 'k'));  // unterminated
  ASSERT_FALSE(read.ok());
  EXPECT_LE(read.status().message().size(), 300u) << read.status().message();
}

}  // namespace
}  // namespace sluice::json

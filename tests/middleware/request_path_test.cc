// NormalPath: every spelling of one path is one key (percent-encodings of unreserved characters,
// their case, dot segments, empty segments, a trailing slash, the query, the absolute form), a
// reserved character stays encoded, and a path with a '%' that encodes nothing is refused.
#include "middleware/request_path.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::middleware {
namespace {

std::string Normal(std::string_view target) {
  Result<std::string> path = NormalPath(target);
  if (!path.ok()) return "<" + path.status().ToString() + ">";
  return *path;
}

bool Refused(std::string_view target) {
  const Result<std::string> path = NormalPath(target);
  return !path.ok() && path.status().code() == StatusCode::kInvalidArgument;
}

TEST(NormalPath, EverySpellingOfLoginIsLogin) {
  for (const char* spelling : {"/login",
                               "/%6cogin",
                               "/%6Cogin",
                               "/l%6fgin",
                               "/l%6Fgin",
                               "/%6C%6F%67%69%6E",
                               "//login",
                               "///login",
                               "/./login",
                               "/a/../login",
                               "/a/b/../../login",
                               "/%2e/login",
                               "/%2E/login",
                               "/a/%2e%2e/login",
                               "/a/%2E%2e/login",
                               "/../login",
                               "/../../login",
                               "/%2e%2e/login",
                               "/login/",
                               "/login//",
                               "/login/.",
                               "/login/./",
                               "/login/x/..",
                               "/login?",
                               "/login?x=1",
                               "/login?a=/../b",
                               "/login#top",
                               "//./a//..//login//",
                               "http://example.com/login",
                               "https://example.com:8443//login/?q",
                               "HTTP://h/%6cogin"}) {
    EXPECT_EQ(Normal(spelling), "/login") << spelling;
  }
}

TEST(NormalPath, AnEncodedReservedCharacterStaysEncodedInUpperCase) {
  EXPECT_EQ(Normal("/%2F"), "/%2F");
  EXPECT_EQ(Normal("/%2f"), "/%2F");
  EXPECT_EQ(Normal("/login%2F"), "/login%2F");
  // An encoded '/' separates nothing: "a%2F..%2Flogin" is one segment, not a way up.
  EXPECT_EQ(Normal("/a%2F..%2Flogin"), "/a%2F..%2Flogin");
  EXPECT_EQ(Normal("/a%3fb"), "/a%3Fb");
  EXPECT_EQ(Normal("/100%25"), "/100%25");
  EXPECT_EQ(Normal("/%256cogin"), "/%256cogin");  // decoded once, not twice
  EXPECT_EQ(Normal("/a%00b"), "/a%00b");
  EXPECT_EQ(Normal("/l%c3%a9"), "/l%C3%A9");
}

TEST(NormalPath, ABytePathsDoNotHoldRawIsEncoded) {
  EXPECT_EQ(Normal("/l\xc3\xa9"), "/l%C3%A9");
  EXPECT_EQ(Normal("/a b"), "/a%20b");
  EXPECT_EQ(Normal("/a\r\nb"), "/a%0D%0Ab");
  EXPECT_EQ(Normal("/a\"b<c>"), "/a%22b%3Cc%3E");
  // pchar stays as it is: sub-delims, ':' and '@'.
  EXPECT_EQ(Normal("/a;b=c,d:e@f!$&'()*+"), "/a;b=c,d:e@f!$&'()*+");
}

TEST(NormalPath, LettersKeepTheirCase) {
  EXPECT_EQ(Normal("/Login"), "/Login");
  EXPECT_EQ(Normal("/%4Cogin"), "/Login");
  EXPECT_NE(Normal("/Login"), Normal("/login"));
}

TEST(NormalPath, TheRootAndItsSpellings) {
  for (const char* root : {"/", "//", "/.", "/..", "/./", "/a/..", "/%2e", "/?x", "/#f",
                           "http://example.com", "http://example.com?x", "http://example.com/"}) {
    EXPECT_EQ(Normal(root), "/") << root;
  }
}

TEST(NormalPath, TrailingSegments) {
  EXPECT_EQ(Normal("/a/b/"), "/a/b");
  EXPECT_EQ(Normal("/a/b/.."), "/a");
  EXPECT_EQ(Normal("/a/b/%2E%2E/"), "/a");
  EXPECT_EQ(Normal("/a/b/..."), "/a/b/...");  // "..." is a name, not a dot segment
  EXPECT_EQ(Normal("/a/.b"), "/a/.b");
  EXPECT_EQ(Normal("/a/b."), "/a/b.");
}

TEST(NormalPath, AnInvalidPercentEncodingIsRefused) {
  for (const char* target : {"/log%zzin", "/login%", "/login%2", "/login%2g", "/%g0", "/%%41",
                             "/a%/b", "/%-1", "/% 1"}) {
    EXPECT_TRUE(Refused(target)) << target << ": " << Normal(target);
  }
  // Past the query, a '%' is the query's business.
  EXPECT_EQ(Normal("/login?q=%zz"), "/login");
}

TEST(NormalPath, WhatIsNeitherAPathNorAnAbsoluteUriIsRefused) {
  for (const char* target :
       {"", "*", "login", "example.com/login", "://x/login", "1http://x/a", "http:/x/login"}) {
    EXPECT_TRUE(Refused(target)) << "'" << target << "': " << Normal(target);
  }
}

TEST(NormalPath, OverlongPathsAreNormalisedWhole) {
  // 100 000 slashes, dot segments and decodings, in time linear in the length.
  EXPECT_EQ(Normal(std::string(100'000, '/') + "login"), "/login");
  std::string ups;
  for (int i = 0; i < 20'000; ++i) ups += "/%2e%2e";
  EXPECT_EQ(Normal(ups + "/login"), "/login");
  std::string deep;
  for (int i = 0; i < 20'000; ++i) deep += "/a";
  std::string back = deep;
  for (int i = 0; i < 20'000; ++i) back += "/..";
  EXPECT_EQ(Normal(back + "/login"), "/login");
  // Long paths are kept whole (never truncated: StoredKey hashes what is too long for a key), so
  // two that differ only at their end stay two.
  EXPECT_EQ(Normal(deep), deep);
  EXPECT_NE(Normal(deep + "/x"), Normal(deep + "/y"));
  std::string encoded;
  for (int i = 0; i < 10'000; ++i) encoded += "%61";
  EXPECT_EQ(Normal("/" + encoded), "/" + std::string(10'000, 'a'));
}

TEST(NormalPath, IsIdempotent) {
  for (const char* target :
       {"/%6cogin", "/a%2f..%2fb", "/l\xc3\xa9/", "//a/./b/../c?x", "/%7e", "/a b", "/100%25"}) {
    const std::string once = Normal(target);
    EXPECT_EQ(Normal(once), once) << target;
  }
}

}  // namespace
}  // namespace sluice::middleware

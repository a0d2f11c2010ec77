// RESP without a server: the exact bytes of commands and EVALSHA, replies parsed from bytes
// that arrive in pieces, and bytes that are not RESP refused.
#include "redis/resp.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::redis {
namespace {

using namespace std::string_literals;
using namespace std::string_view_literals;

std::vector<Reply> ReadAll(ReplyReader& reader) {
  std::vector<Reply> replies;
  while (true) {
    auto next = reader.Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !next->has_value()) return replies;
    replies.push_back(std::move(**next));
  }
}

TEST(AppendCommand, EncodesEveryWordBinarySafe) {
  std::string out;
  const std::string_view set[] = {"SET", "k\0ey"sv, ""};
  AppendCommand(set, out);
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$4\r\nk\0ey\r\n$0\r\n\r\n"s);
  const std::string_view ping[] = {"PING"};
  AppendCommand(ping, out);
  EXPECT_EQ(out.substr(out.size() - 14), "*1\r\n$4\r\nPING\r\n");
}

TEST(AppendCommand, ManyWordsAreAllEncoded) {
  std::vector<std::string> words;
  std::vector<std::string_view> argv;
  for (int i = 0; i < 100; ++i) words.push_back(std::to_string(i));
  for (const auto& w : words) argv.push_back(w);
  std::string out;
  AppendCommand(argv, out);
  EXPECT_TRUE(out.starts_with("*100\r\n$1\r\n0\r\n$1\r\n1\r\n"));
  EXPECT_TRUE(out.ends_with("$2\r\n98\r\n$2\r\n99\r\n"));
}

TEST(AppendEvalSha, ShaThenKeyCountThenKeysThenArguments) {
  const Script script = Script::FromSource("return 1");
  EXPECT_EQ(script.sha1, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");  // Redis's SCRIPT LOAD
  const std::string_view keys[] = {"a", "b"};
  const std::string_view args[] = {"7"};
  std::string out;
  AppendEvalSha({&script, keys, args}, out);
  EXPECT_EQ(out,
            "*6\r\n$7\r\nEVALSHA\r\n$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n$1\r\n2\r\n"
            "$1\r\na\r\n$1\r\nb\r\n$1\r\n7\r\n");
}

TEST(ReplyReader, ParsesEveryType) {
  ReplyReader reader;
  const std::string bytes =
      "+OK\r\n-ERR bad\r\n:-42\r\n$5\r\nhe\0lo\r\n$-1\r\n*3\r\n:1\r\n*1\r\n+in\r\n$-1\r\n"s;
  ASSERT_TRUE(reader.Feed(bytes.data(), bytes.size()));
  const auto replies = ReadAll(reader);
  ASSERT_EQ(replies.size(), 6u);
  EXPECT_EQ(replies[0].type, Reply::Type::kStatus);
  EXPECT_EQ(replies[0].str, "OK");
  EXPECT_TRUE(replies[1].is_error());
  EXPECT_EQ(replies[1].str, "ERR bad");
  EXPECT_EQ(replies[2].type, Reply::Type::kInteger);
  EXPECT_EQ(replies[2].integer, -42);
  EXPECT_EQ(replies[3].type, Reply::Type::kString);
  EXPECT_EQ(replies[3].str, "he\0lo"s);
  EXPECT_EQ(replies[4].type, Reply::Type::kNil);
  ASSERT_EQ(replies[5].type, Reply::Type::kArray);
  ASSERT_EQ(replies[5].elements.size(), 3u);
  EXPECT_EQ(replies[5].elements[0].integer, 1);
  ASSERT_EQ(replies[5].elements[1].elements.size(), 1u);
  EXPECT_EQ(replies[5].elements[1].elements[0].str, "in");
  EXPECT_EQ(replies[5].elements[2].type, Reply::Type::kNil);
}

TEST(ReplyReader, AReplyInPiecesComesOnceComplete) {
  ReplyReader reader;
  const std::string bytes = "*2\r\n:1\r\n$3\r\nabc\r\n";
  for (size_t i = 0; i + 1 < bytes.size(); ++i) {
    ASSERT_TRUE(reader.Feed(bytes.data() + i, 1));
    EXPECT_TRUE(ReadAll(reader).empty()) << "after " << i + 1 << " bytes";
  }
  ASSERT_TRUE(reader.Feed(bytes.data() + bytes.size() - 1, 1));
  const auto replies = ReadAll(reader);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].elements[1].str, "abc");
}

TEST(ReplyReader, BytesThatAreNotRespAreAnError) {
  ReplyReader reader;
  const std::string bytes = "?what\r\n";
  ASSERT_TRUE(reader.Feed(bytes.data(), bytes.size()));
  EXPECT_FALSE(reader.Next().ok());
}

}  // namespace
}  // namespace sluice::redis

// RESP, the Redis protocol, as the client speaks it: commands encoded into bytes, replies parsed
// from bytes, and the Lua scripts calls are made with. hiredis does the work underneath
// (redisFormatCommandArgv, redisReader); nothing here does I/O, so all of it is testable without
// a server.
//
// Thread safety: the free functions are pure; a ReplyReader belongs to one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/status.h"

struct redisReader;

namespace sluice::redis {

// A parsed RESP reply.
struct Reply {
  enum class Type { kString, kStatus, kError, kInteger, kNil, kArray };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<Reply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
};

// A Lua script: its source and SHA1 (as SCRIPT LOAD returns it).
struct Script {
  std::string source;
  std::string sha1;
  static Script FromSource(std::string source);
};

struct ScriptCall {
  const Script* script = nullptr;
  std::span<const std::string_view> keys;
  std::span<const std::string_view> args;
};

// Appends one command (its words, binary-safe) to `out`.
void AppendCommand(std::span<const std::string_view> argv, std::string& out);
// Appends EVALSHA <sha1> <number of keys> <keys> <args>.
void AppendEvalSha(const ScriptCall& call, std::string& out);
// The same in parts: the head of an EVALSHA of `keys` keys and `args` args, which the keys, then
// the args, each appended by AppendBulk, must follow.
void AppendEvalShaHead(const Script& script, size_t keys, size_t args, std::string& out);
void AppendBulk(std::string_view word, std::string& out);

// Replies parsed from the bytes of one connection, in order.
class ReplyReader {
 public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  // False if the bytes cannot be taken (the reader is then broken: start a new one).
  [[nodiscard]] bool Feed(const char* data, size_t size);
  // The next complete reply; nullopt until more bytes come; an error if the bytes are not RESP.
  Result<std::optional<Reply>> Next();

 private:
  redisReader* reader_;
};

}  // namespace sluice::redis

#include "redis/resp.h"

#include <hiredis/hiredis.h>

#include <boost/uuid/detail/sha1.hpp>
#include <charconv>
#include <cstdio>

namespace sluice::redis {
namespace {

Reply ToReply(const redisReply* r) {
  Reply reply;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      reply.type = Reply::Type::kString;
      reply.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      reply.type = Reply::Type::kStatus;
      reply.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      reply.type = Reply::Type::kError;
      reply.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      reply.type = Reply::Type::kInteger;
      reply.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      reply.type = Reply::Type::kArray;
      reply.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) reply.elements.push_back(ToReply(r->element[i]));
      break;
    default:
      reply.type = Reply::Type::kNil;
  }
  return reply;
}

}  // namespace

Script Script::FromSource(std::string source) {
  boost::uuids::detail::sha1 hash;
  hash.process_bytes(source.data(), source.size());
  boost::uuids::detail::sha1::digest_type digest;
  hash.get_digest(digest);
  char hex[41];
  for (int i = 0; i < 5; ++i) std::snprintf(hex + 8 * i, 9, "%08x", digest[i]);
  return Script{.source = std::move(source), .sha1 = std::string(hex, 40)};
}

void AppendCommand(std::span<const std::string_view> argv, std::string& out) {
  constexpr size_t kInline = 24;
  const char* parts_inline[kInline];
  size_t lens_inline[kInline];
  std::vector<const char*> parts_heap;
  std::vector<size_t> lens_heap;
  const char** parts = parts_inline;
  size_t* lens = lens_inline;
  if (argv.size() > kInline) {
    parts_heap.resize(argv.size());
    lens_heap.resize(argv.size());
    parts = parts_heap.data();
    lens = lens_heap.data();
  }
  for (size_t i = 0; i < argv.size(); ++i) {
    parts[i] = argv[i].data();
    lens[i] = argv[i].size();
  }
  char* formatted = nullptr;
  const int n = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), parts, lens);
  if (n > 0) out.append(formatted, static_cast<size_t>(n));
  redisFreeCommand(formatted);
}

void AppendEvalSha(const ScriptCall& call, std::string& out) {
  char numkeys[24];
  const int len = std::snprintf(numkeys, sizeof numkeys, "%zu", call.keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + call.keys.size() + call.args.size());
  argv.push_back("EVALSHA");
  argv.push_back(call.script->sha1);
  argv.emplace_back(numkeys, static_cast<size_t>(len));
  argv.insert(argv.end(), call.keys.begin(), call.keys.end());
  argv.insert(argv.end(), call.args.begin(), call.args.end());
  AppendCommand(argv, out);
}

void AppendEvalShaHead(const Script& script, size_t keys, size_t args, std::string& out) {
  char head[64];
  const int len = std::snprintf(head, sizeof head, "*%zu\r\n$7\r\nEVALSHA\r\n$%zu\r\n",
                                3 + keys + args, script.sha1.size());
  out.append(head, static_cast<size_t>(len));
  out.append(script.sha1);
  out.append("\r\n");
  AppendBulk(std::to_string(keys), out);
}

void AppendBulk(std::string_view word, std::string& out) {
  char head[24] = "$";
  char* end = std::to_chars(head + 1, head + sizeof head - 2, word.size()).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out.append(head, static_cast<size_t>(end - head));
  out.append(word);
  out.append("\r\n");
}

ReplyReader::ReplyReader() : reader_(redisReaderCreate()) {}

ReplyReader::~ReplyReader() { redisReaderFree(reader_); }

bool ReplyReader::Feed(const char* data, size_t size) {
  return redisReaderFeed(reader_, data, size) == REDIS_OK;
}

Result<std::optional<Reply>> ReplyReader::Next() {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    return Status::Internal(std::string("bad reply from Redis: ") + reader_->errstr);
  }
  if (raw == nullptr) return std::optional<Reply>();
  auto* reply = static_cast<redisReply*>(raw);
  std::optional<Reply> converted = ToReply(reply);
  freeReplyObject(reply);
  return converted;
}

}  // namespace sluice::redis

// Redis replies built by hand, for the tests that parse replies without a server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "redis/resp.h"

namespace sluice::redis::testing {

inline Reply MakeReply(Reply::Type type) {
  Reply reply;
  reply.type = type;
  return reply;
}

inline Reply Integer(int64_t n) {
  Reply reply = MakeReply(Reply::Type::kInteger);
  reply.integer = n;
  return reply;
}

inline Reply Text(Reply::Type type, std::string text) {
  Reply reply = MakeReply(type);
  reply.str = std::move(text);
  return reply;
}
inline Reply String(std::string s) { return Text(Reply::Type::kString, std::move(s)); }
inline Reply StatusReply(std::string s) { return Text(Reply::Type::kStatus, std::move(s)); }
inline Reply Error(std::string s) { return Text(Reply::Type::kError, std::move(s)); }

inline Reply Array(std::vector<Reply> elements) {
  Reply reply = MakeReply(Reply::Type::kArray);
  reply.elements = std::move(elements);
  return reply;
}

inline Reply Integers(const std::vector<int64_t>& values) {
  std::vector<Reply> elements;
  for (const int64_t v : values) elements.push_back(Integer(v));
  return Array(std::move(elements));
}

}  // namespace sluice::redis::testing

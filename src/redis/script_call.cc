#include "redis/script_call.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <iterator>

#include "redis/error_reply.h"

namespace sluice::redis {
namespace {

// The algorithm's two parameters.
std::pair<int64_t, int64_t> Parameters(const Limit& limit) {
  if (IsMeter(limit.algorithm())) return {limit.capacity(), limit.emission_interval().count()};
  return {limit.count(), limit.period().count()};
}

}  // namespace

size_t CheckKeyCount(const Limit& limit) {
  return limit.algorithm() == Algorithm::kSlidingLog ? 2 : 1;
}

void ScriptWords::AddText(std::string_view text) {
  const size_t begin = bytes_.size();
  bytes_.append(text);
  Mark(begin);
}

void ScriptWords::AddNumber(int64_t n) {
  char buffer[24];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, n);
  AddText(std::string_view(buffer, static_cast<size_t>(end - buffer)));
}

void ScriptWords::AddKeys(const CheckContext& context, std::string_view scope, std::string_view key,
                          const Limit& limit) {
  // The auxiliary key is the state key and a suffix: two views of the same bytes.
  const size_t begin = bytes_.size();
  AppendStateKey(bytes_, context.prefix, scope, key);
  Mark(begin);
  if (CheckKeyCount(limit) == 2) {
    bytes_.append(kAuxSuffix);
    Mark(begin);
  }
}

void ScriptWords::AddClock(const CheckContext& context) {
  if (context.now) {
    AddNumber(*context.now);
  } else {
    AddText("");
  }
  AddNumber(context.margin_ms);
}

void ScriptWords::AddParameters(const Limit& limit) {
  const auto [a, b] = Parameters(limit);
  AddNumber(a);
  AddNumber(b);
}

void ScriptWords::AddCheck(const CheckContext& context, const CheckRequest& request) {
  AddKeys(context, request.scope, request.key, *request.limit);
  AddClock(context);
  AddNumber(request.cost);
  AddParameters(*request.limit);
  AddNumber(request.max_delay.count());
}

void ScriptWords::AddCheckOfAll(const CheckContext& context, const CheckRequest& request) {
  AddText(AlgorithmName(request.limit->algorithm()));
  AddNumber(static_cast<int64_t>(CheckKeyCount(*request.limit)));
  AddKeys(context, request.scope, request.key, *request.limit);
  AddNumber(request.cost);
  AddParameters(*request.limit);
}

void ScriptWords::AddGiveBack(const CheckContext& context, std::string_view scope,
                              const Limit& limit, std::string_view key, int64_t units,
                              Time apply_by) {
  AddKeys(context, scope, key, limit);
  AddClock(context);
  AddNumber(units);
  AddParameters(limit);
  if (apply_by == kNoApplyBy) {
    AddText("");
  } else {
    AddNumber(apply_by.time_since_epoch().count());
  }
}

ScriptWords::Views ScriptWords::views() const {
  Views views;
  views.reserve(spans_.size());
  const std::string_view all = bytes_.View(0, bytes_.size());
  for (const auto& [offset, length] : spans_) views.push_back(all.substr(offset, length));
  return views;
}

Result<Decision> ParseCheckReply(const Reply& reply, int64_t limit_count) {
  if (reply.is_error()) return ErrorReplyStatus(reply.str, "check");
  const auto& e = reply.elements;
  // check_many.lua answers a check whose key is at fault with its error in its first field.
  if (reply.type == Reply::Type::kArray && e.size() == kPackedCheckReplyFields && e[0].is_error()) {
    return ErrorReplyStatus(e[0].str, "check");
  }
  if (reply.type != Reply::Type::kArray ||
      (e.size() != kCheckReplyFields && e.size() != kPackedCheckReplyFields) ||
      std::any_of(e.begin(), e.end(),
                  [](const Reply& x) { return x.type != Reply::Type::kInteger; })) {
    return Status::Internal("unexpected reply from the Redis check script");
  }
  if (e.size() == kPackedCheckReplyFields) {
    const bool allowed = e[0].integer >= 0;
    return Decision{
        .allowed = allowed,
        .limit = limit_count,
        .remaining = allowed ? e[0].integer : -1 - e[0].integer,
        .retry_after = Duration(allowed ? 0 : e[1].integer),
        .reset_after = Duration(e[2].integer),
        .replenish_after = Duration(e[3].integer),
        .delay = Duration(allowed ? e[1].integer : 0),
    };
  }
  if (e[0].integer != 0 && e[0].integer != 1) {
    return Status::Internal("unexpected reply from the Redis check script: allowed is " +
                            std::to_string(e[0].integer));
  }
  return Decision{
      .allowed = e[0].integer == 1,
      .limit = limit_count,
      .remaining = e[1].integer,
      .retry_after = Duration(e[2].integer),
      .reset_after = Duration(e[3].integer),
      .replenish_after = Duration(e[5].integer),
      .delay = Duration(e[4].integer),
  };
}

Result<Decision> ParseCheckReply(const Result<Reply>& reply, int64_t limit_count) {
  if (!reply.ok()) return reply.status();
  return ParseCheckReply(*reply, limit_count);
}

Result<std::vector<Decision>> ParseCheckAllReply(const Result<Reply>& reply,
                                                 std::span<const int64_t> limit_counts) {
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) return ErrorReplyStatus(reply->str, "CheckAll");
  if (reply->type != Reply::Type::kArray || reply->elements.size() != limit_counts.size()) {
    return Status::Internal("unexpected reply from the Redis CheckAll script");
  }
  std::vector<Decision> decisions;
  decisions.reserve(limit_counts.size());
  for (size_t i = 0; i < limit_counts.size(); ++i) {
    Result<Decision> d = ParseCheckReply(reply->elements[i], limit_counts[i]);
    if (!d.ok()) return d.status();
    decisions.push_back(*d);
  }
  return decisions;
}

Status ParseGiveBackReply(const Result<Reply>& reply) {
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) return ErrorReplyStatus(reply->str, "give-back");
  if (reply->type != Reply::Type::kInteger || (reply->integer != 0 && reply->integer != 1)) {
    return Status::Internal("unexpected reply from the Redis give-back script");
  }
  return Status::Ok();
}

CoalescedCheckWords CoalescedCheckWords::Of(const CoalescibleCall& call) {
  const ScriptCall& single = call.single;
  CoalescedCheckWords check;
  check.key_count = single.keys.size();
  check.shared_count = single.args.size() - 1;
  size_t size = 0;  // each word's bytes and a bulk string's framing: "$<length>\r\n...\r\n"
  for (auto key : single.keys) size += key.size() + 16;
  for (auto arg : single.args) size += arg.size() + 16;
  check.bytes.reserve(size);
  for (auto key : single.keys) AppendBulk(key, check.bytes);
  check.keys_size = check.bytes.size();
  for (size_t i = 0; i < single.args.size(); ++i) {
    if (i != call.own_arg) AppendBulk(single.args[i], check.bytes);
  }
  check.own_at = check.bytes.size();
  AppendBulk(single.args[call.own_arg], check.bytes);
  return check;
}

void CoalescedCallBuilder::Add(const CoalescedCheckWords& check) {
  if (checks_ == 0) {
    first_key_count_ = check.key_count;
    first_keys_size_ = check.keys_size;
  }
  const std::string_view shared = check.shared();
  if (run_count_ == 0 || shared != std::string_view(runs_).substr(last_shared_at_)) {
    AppendBulk(std::to_string(checks_), runs_);
    last_shared_at_ = runs_.size();
    runs_.append(shared);
    ++run_count_;
    run_arg_count_ += 1 + check.shared_count;
  }
  const std::string_view keys = check.keys();
  keys_.append(keys);
  key_hashes_.push_back(std::hash<std::string_view>{}(keys));
  owns_.append(check.own());
  key_count_ += check.key_count;
  ++checks_;
}

void CoalescedCallBuilder::Finish(const Script& many, bool across_slots, std::string& command) {
  const std::string_view keys = keys_;
  // Across slots, the first check's keys are declared and the others follow the args.
  const size_t declared = across_slots ? first_key_count_ : key_count_;
  const size_t declared_size = across_slots ? first_keys_size_ : keys.size();
  AppendEvalShaHead(many, declared, 3 + run_arg_count_ + checks_ + key_count_ - declared, command);
  command.append(keys.substr(0, declared_size));
  AppendBulk(std::to_string(run_count_), command);
  // Equal hashes: keys that may repeat (or collide); the script then looks for repeats itself.
  std::sort(key_hashes_.begin(), key_hashes_.end());
  AppendBulk(
      std::adjacent_find(key_hashes_.begin(), key_hashes_.end()) != key_hashes_.end() ? "1" : "0",
      command);
  AppendBulk(across_slots ? "1" : "0", command);
  command.append(runs_);
  command.append(owns_);
  command.append(keys.substr(declared_size));
  key_hashes_.clear();
  for (std::string* bytes : {&keys_, &runs_, &owns_}) bytes->clear();
  checks_ = key_count_ = run_count_ = run_arg_count_ = 0;
}

size_t CoalescedReplyFields(const Reply& reply, size_t checks) {
  const size_t elements = reply.elements.size();
  if (checks == 0 || reply.type != Reply::Type::kArray || elements == 0 || elements % checks != 0) {
    return 0;
  }
  return elements / checks;
}

Reply TakeCoalescedReply(Reply& reply, size_t i, size_t checks, size_t fields) {
  if (checks == 1) return std::move(reply);
  Reply answer;
  answer.type = Reply::Type::kArray;
  const auto first = reply.elements.begin() + static_cast<ptrdiff_t>(i * fields);
  answer.elements.assign(std::make_move_iterator(first),
                         std::make_move_iterator(first + static_cast<ptrdiff_t>(fields)));
  return answer;
}

}  // namespace sluice::redis

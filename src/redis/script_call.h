// The contract of the Redis store's scripts, written once: what their KEYS and ARGV hold and what
// they reply. The scripts (src/redis/lua/check.lua, check_many.lua, check_all.lua and
// give_back.lua) point here; the builders and the parsers below are the only C++ that writes or
// reads it: the connection (connection.cc) decides which checks share a call and sends the words
// built here.
//
// One check (check.lua, built with the one algorithm it decides):
//   KEYS  the state key [, the auxiliary key: sliding_log's only, see CheckKeyCount]
//   ARGV  1  now in µs ('' for Redis TIME)
//         2  expiry margin in ms (how much longer than its state a key lives)
//         3  cost
//         4  count (window algorithms) or capacity (meters)
//         5  period or emission interval, in µs
//         6  max_delay in µs (how far ahead a meter may book a slot; 0 for none)
//   Reply {allowed (1/0), remaining, retry_after µs, reset_after µs, delay µs, replenish_after µs}
//
// Several checks, each on its own (check_many.lua, built with the one algorithm they all
// decide): the checks a connection coalesced into one call (Client::EvalShaCoalesced).
//   KEYS  each check's KEYS as above, one check after another; across slots (a Redis Cluster
//         node's checks), only the first check's
//   ARGV  1  the number of runs: of consecutive checks whose six ARGV above are the same but for
//            the cost (kCheckCostArg), each check's own
//         2  1 when two of its checks may have the same keys, 0 when none do
//         3  1 when the call is across slots (below), 0 when not
//         then per run, in order: the index of its first check (from 0), and the five ARGV it
//         shares (now, margin, parameters, max_delay)
//         then each check's cost, in order
//         then, across slots, the keys of every check but the first, in order.
//         An empty `now` reads Redis TIME once per call. Across slots (a Redis Cluster node's
//         checks, whose keys are in many slots) the call declares only its first check's keys,
//         by which Redis Cluster routes it (it refuses a call declaring keys of several slots),
//         and the script reaches the others by name, which a script without flags may do on the
//         node that holds them; every key is read before anything is written, so that a key the
//         node does not hold fails the call while it has changed nothing.
//         CoalescedCallBuilder writes this layout for any script of that shape: a check's words
//         are those of its single call (CoalescibleCall::single), one of its ARGV its own.
//   Reply one flat array: per check, in order, its reply as above packed into four fields (each
//         field and array costs Redis's Lua): remaining when allowed, else -1 - remaining;
//         delay when allowed, else retry_after (the other is 0); reset_after; replenish_after.
//         Each is decided as its own call would be, after the checks before it. A check whose
//         key is at fault (WRONGTYPE: it holds another type than the script keeps there, or the
//         script fails on what it holds) has the error, as a check.lua call would have had it,
//         in its first field and 0 in the others; the other checks are decided. Any other
//         error (OOM, a Cluster's refusals) ends the call and is its reply; OOM comes at the
//         call's first write, before it changed anything.
//
// Several checks, all or nothing (check_all.lua, built with every algorithm): the checks whose
// keys one node holds.
//   KEYS  the call's keys in the slot of its first key. A Redis Cluster routes the call by them
//         and refuses keys of several slots declared together; the script is loaded with the
//         flag allow-cross-slot-keys (scripts.cc) and reaches the other keys, which the node must
//         hold too, by their names in ARGV.
//   ARGV  1  now in µs ('' for Redis TIME), as above
//         2  expiry margin in ms, as above
//         3  mode: 'charge' or 'peek'
//         then per check: its algorithm's name, its key count, its keys, its cost, and its
//         two parameters as ARGV 4 and 5 above (nothing is booked ahead: max_delay is 0)
//   Reply one reply as above per check, in order.
//         charge: every check consumes its cost if every one admits, otherwise none does, and a
//           check that would have admitted reports what a peek sees (cost 0), as refused with
//           retry_after 0.
//         peek: decides as charge would and writes nothing; a check that would admit reports
//           what a peek sees, as allowed with retry_after 0.
//   Before anything else the script touches every key once (EXISTS), so that a key the node
//   does not hold fails the call while it has changed nothing.
//
// A give-back (give_back.lua, built with the one meter it gives back to): Store::GiveBack.
//   KEYS  the state key, as a check's
//   ARGV  1  now in µs ('' for Redis TIME), as above
//         2  expiry margin in ms, as above
//         3  units given back
//         4  capacity
//         5  emission interval in µs
//         6  apply by, in µs ('' for none): applied later (by `now`), a unit less is given back
//            per emission interval, or part of one, past it, down to none (Store::GiveBack)
//   Reply 1 when the key held the meter's state, which now has the units back (written with its
//         TTL as a check's commit writes it, or deleted once equivalent to fresh); 0 when it held
//         no state or another algorithm's, left as it was.
//
// Thread safety: pure functions, and builders each owned by one thread (or guarded by its owner).
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/client_options.h"
#include "redis/keys.h"
#include "sluice/decision.h"
#include "sluice/store.h"

namespace sluice::redis {

inline constexpr size_t kCheckArgs = 6;
inline constexpr size_t kCheckCostArg = 2;  // the index of the cost in a check's ARGV
inline constexpr size_t kGiveBackArgs = 6;
// The most checks RedisStoreOptions::coalesce_max lets one check_many.lua call decide.
inline constexpr size_t kCoalesceMaxLimit = 1024;
inline constexpr size_t kCheckReplyFields = 6;
inline constexpr size_t kPackedCheckReplyFields = 4;  // check_many.lua's
inline constexpr std::string_view kChargeMode = "charge";
inline constexpr std::string_view kPeekMode = "peek";
inline constexpr size_t kCheckAllModeArg = 2;  // the mode's index in check_all.lua's ARGV

// What every check of a store sends alike.
struct CheckContext {
  std::string_view prefix;     // of the key names
  std::optional<int64_t> now;  // µs since the epoch; none: Redis TIME
  int64_t margin_ms = 1;
};

// 2 for sliding_log (its count of the units that left the log), 1 for the other algorithms:
// naming a key a script never touches would only make a migrating Cluster slot refuse the call.
size_t CheckKeyCount(const Limit& limit);

// The words of script calls (keys, then ARGV), appended to one buffer and viewed once it stops
// growing. A single check fits in the inline space: building it allocates nothing.
class ScriptWords {
 public:
  using Views = boost::container::small_vector<std::string_view, 8>;

  ScriptWords() = default;
  ScriptWords(const ScriptWords&) = delete;
  ScriptWords& operator=(const ScriptWords&) = delete;

  void AddText(std::string_view text);
  void AddNumber(int64_t n);
  // One check's keys, then its six ARGV.
  void AddCheck(const CheckContext& context, const CheckRequest& request);
  // The first two ARGV of both scripts: now and the expiry margin.
  void AddClock(const CheckContext& context);
  // One check as check_all.lua's ARGV has it: algorithm name, key count, keys, cost, parameters.
  void AddCheckOfAll(const CheckContext& context, const CheckRequest& request);
  // A give-back's key, then its six ARGV.
  void AddGiveBack(const CheckContext& context, std::string_view scope, const Limit& limit,
                   std::string_view key, int64_t units, Time apply_by);

  size_t size() const { return spans_.size(); }
  // Every word so far; valid while this object lives and nothing more is added.
  Views views() const;

 private:
  void Mark(size_t begin) { spans_.emplace_back(begin, bytes_.size() - begin); }
  void AddKeys(const CheckContext& context, std::string_view scope, std::string_view key,
               const Limit& limit);
  void AddParameters(const Limit& limit);

  KeyBuffer bytes_;
  boost::container::small_vector<std::pair<size_t, size_t>, 8> spans_;  // offset, length
};

// One check of a coalesced call (CoalescibleCall), as RESP bulk strings: its keys, then the args
// its run may share, then its own arg.
struct CoalescedCheckWords {
  std::string bytes;
  size_t key_count = 0, shared_count = 0;
  size_t keys_size = 0, own_at = 0;  // where the shared args begin, and its own

  static CoalescedCheckWords Of(const CoalescibleCall& call);
  std::string_view keys() const { return std::string_view(bytes).substr(0, keys_size); }
  std::string_view shared() const {
    return std::string_view(bytes).substr(keys_size, own_at - keys_size);
  }
  std::string_view own() const { return std::string_view(bytes).substr(own_at); }
};

// A coalesced call (check_many.lua's layout, above) built from the checks that join it, in
// order. Finish writes its EVALSHA and empties the builder, which keeps its buffers for the next.
class CoalescedCallBuilder {
 public:
  void Add(const CoalescedCheckWords& check);
  size_t checks() const { return checks_; }
  // Appends the call of `many` with the checks added so far (at least one), and starts over.
  void Finish(const Script& many, bool across_slots, std::string& command);

 private:
  size_t checks_ = 0, key_count_ = 0, run_count_ = 0, run_arg_count_ = 0, last_shared_at_ = 0;
  size_t first_key_count_ = 0, first_keys_size_ = 0;  // the first check's keys, and their bytes
  // The checks' keys; the runs (each the index of its first check, then its shared args, the
  // last run's from last_shared_at_ on); the checks' own args.
  std::string keys_, runs_, owns_;
  std::vector<size_t> key_hashes_;  // of each check's keys
};

// How many of the elements of a coalesced call's flat reply are each of its `checks` checks':
// 0 when the reply is not such an array (an error reply to the whole call, or malformed).
size_t CoalescedReplyFields(const Reply& reply, size_t checks);
// Check i's part of that reply, `fields` elements (CoalescedReplyFields) moved out of it: an
// array of them, or the reply itself when it is the only check's.
Reply TakeCoalescedReply(Reply& reply, size_t i, size_t checks, size_t fields);

// The decision in one check's reply, whole or packed. An error reply, or a packed reply whose
// first field is one (check_many.lua's for a check whose key is at fault), is what
// ErrorReplyStatus (error_reply.h) makes of it; a reply of another shape is INTERNAL.
Result<Decision> ParseCheckReply(const Reply& reply, int64_t limit_count);
Result<Decision> ParseCheckReply(const Result<Reply>& reply, int64_t limit_count);
// The decisions in check_all.lua's reply, one per check, given each check's limit count.
Result<std::vector<Decision>> ParseCheckAllReply(const Result<Reply>& reply,
                                                 std::span<const int64_t> limit_counts);
// The outcome of a give-back: ok for a reply of 0 or 1, an error reply as ParseCheckReply's.
Status ParseGiveBackReply(const Result<Reply>& reply);

}  // namespace sluice::redis

// Store: where limiter state lives and where decisions are made atomically. MemoryStore keeps it
// in this process; a Redis store shares it between processes. A check names a scope (the
// limiter's name, so limiters sharing a store never share state), a Limit, a key and a cost.
//
// Every public method validates its input first: an empty or over-long key, a negative cost or a
// cost above the limit's capacity is answered with an error and changes no state. Cost 0 peeks:
// it reports whether one unit would be admitted now, and the current remaining, consuming nothing.
//
// Reservations: a check on token_bucket, leaky_bucket or gcra may carry a `max_delay`. A request
// that does not fit now but would fit within max_delay (with no other traffic) is then admitted
// by booking its future slot in the same atomic step: the state is consumed now, as if the
// request had queued behind the ones already admitted, and the decision says how long to wait
// (Decision::delay). A booked slot is never given back. A request beyond max_delay is denied and
// consumes nothing; its retry_after is when the same request, with the same max_delay, would be
// booked. A peek never books.
//
// Leases: a check may carry LeaseTerms. A LeasingStore then takes `units` at once in one check and
// decides the next checks of the key in this process from them until they are used or the lease
// ends (leasing_store.h); every other store decides such a check as any other. GiveBack returns
// a lease's unused units to a meter.
//
// Thread safety: all methods may be called concurrently from any thread. Async callbacks run
// exactly once, on the calling thread (if the store decides inline) or on a store thread; they
// must not block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/limit.h"
#include "sluice/status.h"

namespace sluice {

// The longest key and scope accepted, in bytes.
inline constexpr size_t kMaxKeyBytes = 512;
inline constexpr size_t kMaxScopeBytes = 255;
// The most checks Store::CheckAll decides together.
inline constexpr size_t kMaxCheckAll = 256;
// A give-back with no time by which it must be applied (Store::GiveBack).
inline constexpr Time kNoApplyBy = Time::max();

// What a give-back of `units`, due by `apply_by` and applied at `now`, returns to a meter whose
// emission interval is `interval`: a unit less per interval, or part of one, past `apply_by`;
// at least 0.
int64_t UnitsGivenBack(int64_t units, Time apply_by, Time now, Duration interval);

// What a limiter does when its store is out (IsStoreOutage). Applied by ResilientStore; a store
// on its own reports the error.
enum class FailurePolicy : uint8_t {
  kFailOpen,       // admit, and mark the decision degraded
  kFailClosed,     // deny
  kLocalFallback,  // decide in this process, with the limit divided among the instances
};

// "fail_open", "fail_closed", "local_fallback".
const char* FailurePolicyName(FailurePolicy policy);
Result<FailurePolicy> ParseFailurePolicy(std::string_view name);

// True for an outage of the store: it could not be reached, refused the call, or did not answer
// within its deadline (UNAVAILABLE, DEADLINE_EXCEEDED). These, and only these, are decided by a
// FailurePolicy. Every other error is refused wherever it surfaces, never admitted: a full store
// (RESOURCE_EXHAUSTED), a fault of the store or of sluice (INTERNAL, e.g. a Lua script error),
// or a bad request.
bool IsStoreOutage(const Status& status);

// The longest reservation a check may ask for: a year, and at most Limit::kMaxCount emission
// intervals (what keeps a booked-ahead state within the stores' integer bounds).
Duration MaxDelayOf(const Limit& limit);

// How a LeasingStore may decide a limit's checks from units taken ahead: `units` at a time, each
// lease held at most `lifetime`. Off when `units` is 0.
struct LeaseTerms {
  int64_t units = 0;
  Duration lifetime{0};

  friend bool operator==(const LeaseTerms&, const LeaseTerms&) = default;
};

// The longest lease lifetime accepted.
inline constexpr Duration kMaxLeaseLifetime = std::chrono::minutes(1);

// An error unless `terms` are off, or lease between 1 and the limit's capacity units of a
// fixed_window or a meter (IsMeter) for between 1 ms and kMaxLeaseLifetime.
Status ValidateLeaseTerms(const Limit& limit, const LeaseTerms& terms);

// What a request points to need only live for the duration of the call, async calls included.
struct CheckRequest {
  std::string_view scope;
  const Limit* limit = nullptr;
  std::string_view key;
  int64_t cost = 1;
  FailurePolicy on_error = FailurePolicy::kFailOpen;
  // Above zero: book a future slot up to this far ahead instead of denying (see above). Only for
  // meters (IsMeter); between 0 and MaxDelayOf(limit).
  Duration max_delay{0};
  // Leases for this limit (see above). Only checks of cost >= 1 with no max_delay are leased.
  LeaseTerms lease = LeaseTerms{};
};

using DecisionCallback = std::function<void(Result<Decision>)>;
using BatchCallback = std::function<void(std::vector<Result<Decision>>)>;
using StatusCallback = std::function<void(Status)>;
using AllCallback = std::function<void(Result<std::vector<Decision>>)>;

// An error if the request is malformed; ok otherwise.
Status ValidateCheck(const CheckRequest& request);

// Whether a LeasingStore decides `request` (valid) from leases: it carries lease terms, consumes
// (cost >= 1), books nothing, and fits in one lease.
bool Leasable(const CheckRequest& request);

// A store decides through four virtuals: a batch of checks, each on its own (DoCheckBatchAsync),
// checks all or nothing (DoCheckAllAsync), a reset and a give-back. Every other form (one check,
// the blocking forms) is written once, here, on top of them, so that a store that wraps another
// (ResilientStore, LeasingStore) passes every call down the same path and cannot leave one out.
class Store {
 public:
  virtual ~Store() = default;

  // A batch of one, blocking until decided.
  Result<Decision> Check(const CheckRequest& request);
  // A batch of one.
  void CheckAsync(const CheckRequest& request, DecisionCallback done);
  // Decides each request in order; results come back in the same order. A malformed request
  // gets its error and does not stop the others.
  std::vector<Result<Decision>> CheckBatch(std::span<const CheckRequest> requests);
  void CheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done);
  // Several checks decided together, all or nothing: if every one admits, each consumes its
  // cost; otherwise none consumes anything. One decision per request, in order; the requests
  // were admitted iff all are allowed. When some refuse, those that would have admitted report
  // what a peek sees (their remaining, reset_after and replenish_after) as not allowed with
  // retry_after 0: the wait is the largest retry_after among those that refused.
  // The requests name distinct (scope, key) pairs and book nothing (max_delay 0); otherwise, or
  // if any is malformed, its error comes back and nothing is decided. The step is atomic on
  // MemoryStore and on one Redis; on a Redis Cluster, see RedisStore.
  Result<std::vector<Decision>> CheckAll(std::span<const CheckRequest> requests);
  void CheckAllAsync(std::span<const CheckRequest> requests, AllCallback done);
  // Gives back `units` that checks of a meter's `limit` on (scope, key) consumed and did not use
  // (the rest of a lease): the state moves by `units` towards fresh, never past it. A key with no
  // state, or with another algorithm's, is left as it is. INVALID_ARGUMENT, changing nothing,
  // when the limit is not a meter (IsMeter) or `units` is not between 1 and its capacity, and
  // from a store that cannot give back (the default).
  // That is the state had they not been consumed, unless the meter would have been full without
  // them at some time since: its refill was then wasted, at most a unit per emission interval,
  // and giving all of them back would return that too. A caller that must never over-admit gives
  // back at most units - ceil(age / emission_interval), age being how long ago they were
  // consumed, counted up to when the store applies the call (LeasingStore does).
  // Such a caller cannot know when that is: it counts up to `apply_by`, and a store that applies
  // the call later (by its own clock, Redis TIME on Redis) gives back a unit less per emission
  // interval, or part of one, past `apply_by`, down to none. So a late give-back returns less,
  // never more. The default, kNoApplyBy, gives back `units` whenever it is applied.
  Status GiveBack(std::string_view scope, const Limit& limit, std::string_view key, int64_t units,
                  Time apply_by = kNoApplyBy);
  void GiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                     int64_t units, StatusCallback done, Time apply_by = kNoApplyBy);
  // Forgets the key's state: its next check sees a fresh limit.
  Status Reset(std::string_view scope, std::string_view key);
  void ResetAsync(std::string_view scope, std::string_view key, StatusCallback done);

  // The failure domain of (scope, key): the part of the store that decides it and can fail while
  // the others go on answering (a Redis Cluster master). Ids are small and stable: a domain keeps
  // its id and no other domain gets it. A store of one domain answers 0 for every key.
  virtual uint32_t FailureDomain(std::string_view /*scope*/, std::string_view /*key*/) const {
    return 0;
  }
  // The domain's name for stats and metrics ("127.0.0.1:7001"); empty when it has none.
  virtual std::string FailureDomainName(uint32_t /*domain*/) const { return {}; }

  // A readiness probe: whether the store answers now. Peeks (cost 0) at an internal key that no
  // limiter shares (ReadinessProbe) and answers with the store's own result, errors included; a
  // store that stands in for failures (ResilientStore) answers with its backend's, so that a
  // failure policy never makes it look ready.
  virtual void ProbeAsync(DecisionCallback done);

  // True when every call is decided on the calling thread, with no I/O (MemoryStore): its
  // callbacks always run inline, and load on it comes from threads, not calls in flight.
  virtual bool DecidesInline() const { return false; }

 protected:
  // The peek ProbeAsync sends: scope "#sluice", key "readyz", fixed_window 1 per second. The
  // request and what it points to live as long as the program.
  static CheckRequest ReadinessProbe();

  // What a store decides, called with validated input only. Each callback runs exactly once.
  // The requests (and what they point to) live only during the call.
  virtual void DoCheckBatchAsync(std::span<const CheckRequest> requests, BatchCallback done) = 0;
  virtual void DoCheckAllAsync(std::span<const CheckRequest> requests, AllCallback done) = 0;
  virtual void DoResetAsync(std::string_view scope, std::string_view key, StatusCallback done) = 0;
  // The default answers INVALID_ARGUMENT: this store cannot give units back.
  virtual void DoGiveBackAsync(std::string_view scope, const Limit& limit, std::string_view key,
                               int64_t units, Time apply_by, StatusCallback done);
};

}  // namespace sluice

// DELETE /v1/keys/{rule}/{key}: forgets a key's state on the store (Store::ResetAsync, as
// Limiter::Reset does), so that its next check sees a fresh limit: for support staff when a
// customer was limited by mistake. {rule} is a rule's name, {key} the key as clients give it in
// their checks, percent-encoded as one path segment ("user%2F42" for "user/42").
//
//   204  the store forgot the key (a key it did not hold included)
//   404  no such rule
//   400  no key, a key that is not one segment or is badly encoded, empty or over kMaxKeyBytes
//   503  the store is out or full (with Retry-After): nothing was reset; 500 for a fault
//
// Each reset is counted (sluice_key_resets_total{rule}) and logged with the rule, who asked (the
// caller's name from server.auth, never a token; the peer address) and the key's SHA-256, not the
// key: keys are the clients' identities.
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange.
#pragma once

#include <string_view>

#include "http/answers.h"
#include "http/handler.h"
#include "http/metrics.h"
#include "sluice/store.h"

namespace sluice::http {

inline constexpr std::string_view kKeysPathPrefix = "/v1/keys/";

class ResetHandler final : public Handler {
 public:
  // `store`, `metrics` and `answers` must outlive this object.
  ResetHandler(Store& store, Metrics& metrics, Answers& answers)
      : store_(store), metrics_(metrics), answers_(answers) {}

  // The call's `who` names the caller and its address in the log.
  bool Handle(Call& call, Exchange& exchange) override;

 private:
  void Reset(std::string_view rest, Call& call, Exchange& exchange);

  Store& store_;
  Metrics& metrics_;
  Answers& answers_;
};

}  // namespace sluice::http

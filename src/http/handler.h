// The shape of every handler of the Api (http/api.h), one for each path it serves: a request
// routed to it, the Call, answered into its Exchange through Answers (http/answers.h), at once or
// later from a store's thread.
// What a handler keeps of a request until its answer is its own, a state of its own type held by
// the Exchange (Exchange::StateOf).
//
// Thread safety: Handle may be called concurrently, each call with its own Exchange.
#pragma once

#include <memory>
#include <string_view>

#include "http/exchange.h"
#include "http/rule_table.h"

namespace sluice::http {

// A request as the Api hands it to its handler, once the caller is allowed to make it.
struct Call {
  const Request& request;
  std::string_view path;  // the target, up to its query
  // The rule set the request is decided by; a handler that answers later keeps it (moved into its
  // state) until then, so that a reload does not free its rules meanwhile.
  std::shared_ptr<const RuleTable> rules;
  // Who made it, its caller's name and address, for the log of what it changes: set for the
  // paths that change state (DELETE /v1/keys), empty for the others.
  std::string_view who;
};

class Handler {
 public:
  virtual ~Handler() = default;

  // Answers `call` into `exchange`, now or later. Returns true when the answer is still to come
  // and waits only for the request's turn (see Api::Handle).
  virtual bool Handle(Call& call, Exchange& exchange) = 0;
};

}  // namespace sluice::http

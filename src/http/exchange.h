// One request to the Api and its answer, apart from any socket: the request as the HTTP layer
// read it (Request), the answer as it is built (Response), and the Exchange that carries the
// request through the Api's handlers until its answer is complete.
//
// Thread safety: an Exchange carries one request at a time; the caller must not touch it
// between Api::Handle and on_done, except as Api::Abandon allows.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/fair_admission.h"
#include "sluice/store.h"

namespace sluice::middleware {
class RequestView;
}  // namespace sluice::middleware

namespace sluice::http {

inline constexpr size_t kMaxBodyBytes = 64 * 1024;

// Which of the Api's endpoints a listener serves: all of them (one port), or, with a second
// port for operators (server.admin_listen), the decisions on one and the operators' endpoints on
// the other; /healthz and /readyz on both.
enum class Endpoints : uint8_t {
  kAll,
  kDecisions,  // /v1/check, /v1/acquire, /v1/auth, POST /json
  kAdmin,      // /metrics, /v1/top, the dashboard, DELETE /v1/keys
};

struct Request {
  std::string_view method;
  std::string_view target;
  std::string_view body;
  // The peer and the headers, for /v1/auth; null when the caller has none to show.
  const middleware::RequestView* client = nullptr;
  // Who sends it, for the store's admission (core/fair_admission.h): the HTTP connection.
  core::FairAdmission::Caller caller = 0;
  // What the listener it came in on serves; any other path is answered 404, as an unknown one.
  Endpoints endpoints = Endpoints::kAll;
  // The DNS and URI names of the client's certificate, verified, under mTLS
  // (server.tls.client_ca_file): they identify a caller by client_san (auth/callers.h). Nullopt
  // when the client presented none.
  std::optional<std::span<const std::string>> certificate_names = std::nullopt;
};

struct Header {
  std::string_view name;  // a string literal
  std::string value;
};

// Reused from one request to the next: Reset keeps the strings' capacity.
struct Response {
  int status = 200;
  std::string_view content_type;  // a string literal
  std::array<Header, 4> headers;
  size_t header_count = 0;
  std::string body;

  void Reset();
  void AddHeader(std::string_view name, std::string_view value);
  // The value of header `name`, or null when it is absent.
  const std::string* FindHeader(std::string_view name) const;
};

class RuleTable;
struct ServedRule;
struct PendingAcquire;  // acquire_handler.cc

// One request on its way through the Api. The caller owns it (one per connection, reused), keeps
// it alive until on_done runs, and reads the answer from `response`.
class Exchange {
 public:
  // Called once per Handle, when `response` is complete: on the calling thread or on a store
  // thread. Must not block.
  explicit Exchange(std::function<void()> on_done) : on_done_(std::move(on_done)) {}

  Response response;

 private:
  friend class Api;
  friend class Answers;
  friend class CheckHandler;
  friend class AcquireHandler;
  friend class AuthHandler;

  struct BatchItem {
    const ServedRule* rule = nullptr;  // null: `error` says why the item was not decided
    std::string error;
    std::string key;  // for TopKeys, should it be denied
  };

  std::function<void()> on_done_;
  std::shared_ptr<const RuleTable> rules_;  // keeps rule_ and batch_ rules alive
  const ServedRule* rule_ = nullptr;
  std::string key_;  // the check's or the acquire's, for TopKeys, should it be denied
  std::chrono::steady_clock::time_point started_;
  std::vector<BatchItem> batch_;
  std::vector<CheckRequest> requests_;
  std::shared_ptr<PendingAcquire> acquire_;  // the last /v1/acquire, for Abandon
  core::FairAdmission::Caller caller_ = 0;
  core::FairAdmission::Ticket ticket_;  // the store work admitted, held until the answer
  std::chrono::steady_clock::time_point admitted_at_;
  std::vector<Result<Decision>> results_;  // a batch's, as its parts are answered
};

}  // namespace sluice::http

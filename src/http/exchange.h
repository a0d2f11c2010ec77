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
#include <typeinfo>

#include "core/fair_admission.h"

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

// One request on its way through the Api. The caller owns it (one per connection, reused), keeps
// it alive until on_done runs, and reads the answer from `response`. The Api's handlers
// (http/handler.h) keep what a request needs until its answer in a state of their own type here
// (StateOf), and the store work admitted for it in `admitted`.
class Exchange {
 public:
  // Called once per Handle, when `response` is complete: on the calling thread or on a store
  // thread. Must not block.
  explicit Exchange(std::function<void()> on_done) : on_done_(std::move(on_done)) {}

  Response response;

  // The store work admitted for the request (http/answers.h), held until the store answers it.
  struct Admitted {
    core::FairAdmission::Ticket ticket;
    std::chrono::steady_clock::time_point at;
  };
  Admitted admitted;

  // Starts the next request, from `caller`: an empty response.
  void Start(core::FairAdmission::Caller caller) {
    response.Reset();
    caller_ = caller;
  }
  core::FairAdmission::Caller caller() const { return caller_; }

  // The response is complete: calls on_done.
  void Done() { on_done_(); }

  // The state of the handler answering the request, of the handler's own type: kept for the next
  // request the same kind of state serves (its strings and vectors keep their capacity), replaced
  // when another kind is asked for.
  template <class State>
  State& StateOf() {
    if (!Holds<State>()) {
      state_ = std::make_unique<Held<State>>();
      state_type_ = &typeid(State);
    }
    return static_cast<Held<State>&>(*state_).state;
  }
  // The state StateOf<State> gave last, or null when another kind has been asked for since.
  template <class State>
  State* FindState() {
    return Holds<State>() ? &static_cast<Held<State>&>(*state_).state : nullptr;
  }

 private:
  struct AnyState {
    virtual ~AnyState() = default;
  };
  template <class State>
  struct Held final : AnyState {
    State state;
  };
  template <class State>
  bool Holds() const {
    return state_type_ != nullptr && *state_type_ == typeid(State);
  }

  std::function<void()> on_done_;
  core::FairAdmission::Caller caller_ = 0;
  std::unique_ptr<AnyState> state_;
  const std::type_info* state_type_ = nullptr;
};

}  // namespace sluice::http

// Status and Result<T>: how sluice reports errors at its boundary. A Status is a code and a
// message meant for a person; Result<T> holds either a T or a non-ok Status. Both are plain
// values: copyable, movable, and safe to share between threads once built. Both are [[nodiscard]]:
// a call whose error is ignored on purpose says so with a (void) cast and the reason.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace sluice {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller's input is wrong; nothing was changed
  kCostExceedsLimit,   // the cost can never be admitted by this limit; do not retry
  kResourceExhausted,  // a bound of the store was reached (keys, pending requests)
  kUnavailable,        // the store cannot be reached or refused the call
  kDeadlineExceeded,   // no answer within the deadline
  kInternal,           // a bug or a protocol violation
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status CostExceedsLimit(std::string m) {
    return {StatusCode::kCostExceedsLimit, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: limit must be positive", or "OK".
  std::string ToString() const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or an error. Accessing value() of an error is a bug (asserted).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // The error, or an ok Status when this holds a value.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace sluice

// Status and Result: how every spool call reports success or failure.
//
// spool never throws across its public API. A call that can fail returns a
// Status, a Result<T>, or a Future that resolves to one. Both types are
// [[nodiscard]]: an error is something the caller must look at.
//
// Thread safety: a Status or Result is a value. Distinct objects may be used
// from different threads; one object needs external synchronization.

#ifndef SPOOL_INCLUDE_STATUS_H_
#define SPOOL_INCLUDE_STATUS_H_

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace spool {

class [[nodiscard]] Status {
 public:
  enum class Code : unsigned char {
    kOk = 0,
    // The named task, type or key does not exist.
    kNotFound = 1,
    // Stored data failed verification (a damaged task record).
    kCorruption = 2,
    // The caller passed something spool rejects (an argument, a config file);
    // the message says what.
    kInvalidArgument = 3,
    // The disk or the storage engine failed.
    kIOError = 4,
    // The resource is held by someone else, e.g. the directory by another
    // process.
    kBusy = 5,
    // The runtime is closed or closing.
    kClosed = 6,
    // The call is valid but not in the current state (e.g. register after
    // start, cancel of a finished task).
    kFailedPrecondition = 7,
    // A wait ran out of time.
    kTimedOut = 8,
    // Written by a newer spool, or a feature this build does not have.
    kNotSupported = 9,
    // The operation was cancelled before it completed.
    kCancelled = 10,
    // The operation failed part-way, e.g. a handler threw.
    kAborted = 11,
  };

  // Creates an OK status.
  Status() noexcept = default;

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view msg) {
    return Status(Code::kNotFound, msg);
  }
  static Status Corruption(std::string_view msg) {
    return Status(Code::kCorruption, msg);
  }
  static Status InvalidArgument(std::string_view msg) {
    return Status(Code::kInvalidArgument, msg);
  }
  static Status IOError(std::string_view msg) {
    return Status(Code::kIOError, msg);
  }
  static Status Busy(std::string_view msg) { return Status(Code::kBusy, msg); }
  static Status Closed(std::string_view msg) {
    return Status(Code::kClosed, msg);
  }
  static Status FailedPrecondition(std::string_view msg) {
    return Status(Code::kFailedPrecondition, msg);
  }
  static Status TimedOut(std::string_view msg) {
    return Status(Code::kTimedOut, msg);
  }
  static Status NotSupported(std::string_view msg) {
    return Status(Code::kNotSupported, msg);
  }
  static Status Cancelled(std::string_view msg) {
    return Status(Code::kCancelled, msg);
  }
  static Status Aborted(std::string_view msg) {
    return Status(Code::kAborted, msg);
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsIOError() const { return code_ == Code::kIOError; }
  bool IsBusy() const { return code_ == Code::kBusy; }
  bool IsClosed() const { return code_ == Code::kClosed; }
  bool IsFailedPrecondition() const {
    return code_ == Code::kFailedPrecondition;
  }
  bool IsTimedOut() const { return code_ == Code::kTimedOut; }
  bool IsNotSupported() const { return code_ == Code::kNotSupported; }
  bool IsCancelled() const { return code_ == Code::kCancelled; }
  bool IsAborted() const { return code_ == Code::kAborted; }

  // The message alone, without the code. Empty for OK.
  const std::string& message() const;

  // "OK", or the code's name, ": ", and the message.
  std::string ToString() const;

  // Returns a copy whose message is `context` + ": " + this message. OK stays
  // OK. Used to say which call or file an error came from.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message() == b.message();
  }
  friend bool operator!=(const Status& a, const Status& b) { return !(a == b); }

 private:
  Status(Code code, std::string_view msg);

  Code code_ = Code::kOk;
  // Shared so that copying an error is cheap; null for OK.
  std::shared_ptr<const std::string> message_;
};

// The name of a code, e.g. "InvalidArgument".
const char* CodeName(Status::Code code);

// A value of type T, or the Status that explains why there is none.
//
// REQUIRES: value() is called only when ok(); status() is always valid.
template <class T>
class [[nodiscard]] Result {
 public:
  // A result holding `value`.
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit on purpose
  // A failed result. REQUIRES: !status.ok().
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "a Result built from a Status must be an error");
    if (status_.ok()) status_ = Status::InvalidArgument("OK used as an error");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // The value when ok(), else `fallback`.
  T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

 private:
  Status status_;
  std::optional<T> value_;
};

// Result<void> carries only a Status; it exists so that generic code (such as
// Future<void>) can treat "no value" like any other result.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Status status) : status_(std::move(status)) {}  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_STATUS_H_

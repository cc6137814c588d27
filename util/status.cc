#include <spool/status.h>

namespace spool {

Status::Status(Code code, std::string_view msg)
    : code_(code), message_(std::make_shared<const std::string>(msg)) {}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return message_ ? *message_ : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out = CodeName(code_);
  if (!message().empty()) {
    out += ": ";
    out += message();
  }
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  if (!message().empty()) {
    msg += ": ";
    msg += message();
  }
  return Status(code_, msg);
}

const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kNotFound:
      return "NotFound";
    case Status::Code::kCorruption:
      return "Corruption";
    case Status::Code::kInvalidArgument:
      return "InvalidArgument";
    case Status::Code::kIOError:
      return "IOError";
    case Status::Code::kBusy:
      return "Busy";
    case Status::Code::kClosed:
      return "Closed";
    case Status::Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Status::Code::kTimedOut:
      return "TimedOut";
    case Status::Code::kNotSupported:
      return "NotSupported";
    case Status::Code::kCancelled:
      return "Cancelled";
    case Status::Code::kAborted:
      return "Aborted";
  }
  return "Unknown";
}

}  // namespace spool

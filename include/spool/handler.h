// Handlers: the application code that runs tasks.

#ifndef SPOOL_INCLUDE_HANDLER_H_
#define SPOOL_INCLUDE_HANDLER_H_

#include <functional>
#include <string_view>

#include <spool/status.h>
#include <spool/task.h>

namespace spool {

// What a handler knows about the attempt it runs.
//
// The context, and every string_view it returns, is valid only until the
// handler returns. Copy what must outlive the call.
class TaskContext {
 public:
  TaskId id() const { return id_; }
  std::string_view type() const { return type_; }
  std::string_view payload() const { return payload_; }
  // 1 for the first attempt; a crash-interrupted attempt counts.
  uint32_t attempt() const { return attempt_; }
  uint32_t max_attempts() const { return max_attempts_; }
  int32_t priority() const { return priority_; }

 private:
  friend class TaskContextBuilder;
  TaskContext() = default;

  TaskId id_ = 0;
  std::string_view type_;
  std::string_view payload_;
  uint32_t attempt_ = 0;
  uint32_t max_attempts_ = 0;
  int32_t priority_ = 0;
};

// Runs one attempt of a task.
//
// Return OK when the task is done. Returning an error, or throwing, fails the
// attempt: its message (or what()) is stored as the task's last error and the
// retry policy decides what happens next.
//
// Handlers run on spool's worker threads, one task per worker at a time, and
// may block. They may call back into the runtime (Enqueue, Get, ...) but must
// not wait for Close or Drain there: those wait for the handler itself.
using Handler = std::function<Status(TaskContext& context)>;

// Options registered with a task type's handler.
struct HandlerOptions {
  // The retry policy of tasks of this type that do not set their own.
  // Default: RetryPolicy{} (exponential, 3 attempts).
  RetryPolicy retry;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_HANDLER_H_

// The handlers registered per task type, and how a worker runs one.

#ifndef SPOOL_ACTORS_HANDLER_REGISTRY_H_
#define SPOOL_ACTORS_HANDLER_REGISTRY_H_

#include <string>
#include <unordered_map>

#include <spool/handler.h>

#include "actors/attempt_control.h"
#include "actors/messages.h"
#include "storage/record.h"

namespace spool {

// Builds the TaskContext a handler sees. Lives here, not in the public
// header, because only workers create contexts.
class TaskContextBuilder {
 public:
  // `payload` is the record's payload, or its migrated form; `control` may
  // be null (nothing cancels the attempt then).
  static TaskContext For(const storage::TaskRecord& record,
                         std::string_view payload,
                         internal::AttemptControl* control) {
    TaskContext context;
    context.id_ = record.id;
    context.type_ = record.type;
    context.payload_ = payload;
    context.attempt_ = record.attempts;
    context.max_attempts_ = record.max_attempts;
    context.priority_ = record.priority;
    context.idempotency_key_ = record.idempotency_key;
    context.group_ = record.group;
    context.control_ = control;
    return context;
  }
};

namespace actors {

struct RegisteredHandler {
  Handler handler;
  HandlerOptions options;
};

// Runs one attempt of `record` with its registered handler and returns the
// outcome. A handler that throws fails the attempt with the exception's
// text; a type with no handler, a payload newer than the handler, or a
// failed migration fails the task without retry. The handler's retry filter
// and delay (and TaskContext::SetRetryDelay) shape the outcome.
Outcome RunAttempt(const HandlerRegistry& registry,
                   const storage::TaskRecord& record,
                   internal::AttemptControl* control);

}  // namespace actors
}  // namespace spool

#endif  // SPOOL_ACTORS_HANDLER_REGISTRY_H_

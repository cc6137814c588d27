// The handlers registered per task type, and how a worker runs one.

#ifndef SPOOL_ACTORS_HANDLER_REGISTRY_H_
#define SPOOL_ACTORS_HANDLER_REGISTRY_H_

#include <string>
#include <unordered_map>

#include <spool/handler.h>

#include "actors/messages.h"
#include "storage/record.h"

namespace spool {

// Builds the TaskContext a handler sees. Lives here, not in the public
// header, because only workers create contexts.
class TaskContextBuilder {
 public:
  static TaskContext For(const storage::TaskRecord& record) {
    TaskContext context;
    context.id_ = record.id;
    context.type_ = record.type;
    context.payload_ = record.payload;
    context.attempt_ = record.attempts;
    context.max_attempts_ = record.max_attempts;
    context.priority_ = record.priority;
    return context;
  }
};

namespace actors {

struct RegisteredHandler {
  Handler handler;
  HandlerOptions options;
};

// Task type -> handler. Built before start and immutable afterwards, so
// workers share it without locks.
using HandlerRegistry = std::unordered_map<std::string, RegisteredHandler>;

// Runs one attempt of `record` with its registered handler and returns the
// outcome. A handler that throws fails the attempt with the exception's
// text; a type with no handler fails the task permanently.
Outcome RunAttempt(const HandlerRegistry& registry,
                   const storage::TaskRecord& record);

}  // namespace actors
}  // namespace spool

#endif  // SPOOL_ACTORS_HANDLER_REGISTRY_H_

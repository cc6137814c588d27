// The handlers registered per task type, and how a worker runs one.

#ifndef SPOOL_ACTORS_HANDLER_REGISTRY_H_
#define SPOOL_ACTORS_HANDLER_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <spool/handler.h>

#include "actors/attempt_control.h"
#include "actors/messages.h"
#include "storage/record.h"

namespace spool::storage::fb {
struct TaskSpec;
}

namespace spool {

namespace actors {
// What an attempt gets besides its task: the runtime's bounds on what a
// handler may ask for (Options::max_result_bytes, max_snoozes), and how its
// dependencies ended (null: it has none).
struct AttemptInputs {
  size_t max_result_bytes = 0;
  uint32_t max_snoozes = 0;
  const std::vector<DependencyOutcome>* dependencies = nullptr;
};
}  // namespace actors

// Builds the TaskContext a handler sees. Lives here, not in the public
// header, because only workers create contexts.
class TaskContextBuilder {
 public:
  // `spec` is the task as stored (read in place, verified); `payload` is
  // its payload, or its migrated form; `control` may be null (nothing
  // cancels the attempt then).
  static TaskContext For(const actors::ClaimedTask& task,
                         const storage::fb::TaskSpec& spec,
                         std::string_view payload,
                         internal::AttemptControl* control,
                         const actors::AttemptInputs& inputs);
  // The same, for a task known only by its parts (a remote worker's lease).
  static TaskContext For(const actors::ClaimedTask& task,
                         std::string_view payload, std::string_view group,
                         std::string_view idempotency_key,
                         internal::AttemptControl* control,
                         const actors::AttemptInputs& inputs);
};

namespace actors {

struct RegisteredHandler {
  Handler handler;
  // As registered, with every optional field filled in from the config or
  // the defaults (RuntimeImpl::ResolveHandlerOptions).
  HandlerOptions options;
};

// Runs one attempt of the claimed `task`, whose stored spec is `spec`
// (verified), with its registered handler and returns the outcome. A handler
// that throws fails the attempt with the exception's text; a type with no
// handler, a payload newer than the handler, or a failed migration fails the
// task without retry. The handler's retry filter and delay (and
// TaskContext::SetRetryDelay) shape the outcome. A snooze past
// `inputs.max_snoozes` fails the attempt.
Outcome RunAttempt(const HandlerRegistry& registry, const ClaimedTask& task,
                   const storage::fb::TaskSpec& spec,
                   internal::AttemptControl* control,
                   const AttemptInputs& inputs);

// Runs one attempt of a task leased to a remote worker with `entry`, the
// worker's handler: as RunAttempt does, minus what needs the store (payload
// versions, dependencies). `payload`, `group` and `idempotency_key` come
// with the lease.
Outcome RunLeasedAttempt(const RegisteredHandler& entry,
                         const ClaimedTask& task, std::string_view payload,
                         std::string_view group,
                         std::string_view idempotency_key,
                         internal::AttemptControl* control,
                         const AttemptInputs& inputs);

}  // namespace actors
}  // namespace spool

#endif  // SPOOL_ACTORS_HANDLER_REGISTRY_H_

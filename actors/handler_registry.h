// The handlers registered per task type, and how a worker runs one.

#ifndef SPOOL_ACTORS_HANDLER_REGISTRY_H_
#define SPOOL_ACTORS_HANDLER_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <spool/handler.h>

#include "actors/attempt_control.h"
#include "actors/messages.h"
#include "actors/rate_buckets.h"
#include "storage/record.h"

namespace spool::storage::fb {
struct TaskSpec;
}

namespace spool {

namespace actors {
// Told that an attempt's handler is about to run: after every check that
// may keep the attempt from starting (a named rate limit's wait among
// them), so that what it records (the start log, the start's metrics)
// counts only attempts that began.
class AttemptStartListener {
 public:
  virtual void Starting() = 0;

 protected:
  ~AttemptStartListener() = default;
};

// What an attempt gets besides its task: the runtime's bounds on what a
// handler may ask for (Options::max_result_bytes, max_snoozes), how its
// dependencies ended (null: it has none), the named rate limits that
// admit it (null: there are none), and who is told of its start (null: no
// one).
struct AttemptInputs {
  size_t max_result_bytes = 0;
  uint32_t max_snoozes = 0;
  const std::vector<DependencyOutcome>* dependencies = nullptr;
  RateBuckets* rate_buckets = nullptr;
  AttemptStartListener* on_start = nullptr;
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
  // Lets the context's handler hold the buckets its attempt was admitted
  // under (TaskContext::HoldRateLimits); `hold` outlives the handler.
  static void HoldWith(TaskContext& context, internal::RateHold* hold) {
    context.rate_hold_ = hold;
  }
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

// Asks `buckets` (null: no named rate limits) whether the attempt `context`
// describes may start now. False: `outcome` is complete, given back
// unstarted until its reserved slot (DeferReason::kRateLimited), or failed
// by a key function. True: it may start; `admitted` then holds the buckets
// it counted against, if any.
bool AdmitByRate(RateBuckets* buckets, const ClaimedTask& task,
                 const TaskContext& context,
                 std::optional<AdmittedBuckets>* admitted, Outcome* outcome);

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

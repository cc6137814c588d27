#include "actors/handler_registry.h"

#include <exception>

#include "storage/task_record_generated.h"

namespace spool {

TaskContext TaskContextBuilder::For(const actors::ClaimedTask& task,
                                    const storage::fb::TaskSpec& spec,
                                    std::string_view payload,
                                    internal::AttemptControl* control,
                                    const actors::AttemptInputs& inputs) {
  auto view = [](const flatbuffers::String* s) {
    return s == nullptr ? std::string_view() : s->string_view();
  };
  return For(task, payload, view(spec.group()), view(spec.idempotency_key()),
             control, inputs);
}

TaskContext TaskContextBuilder::For(const actors::ClaimedTask& task,
                                    std::string_view payload,
                                    std::string_view group,
                                    std::string_view idempotency_key,
                                    internal::AttemptControl* control,
                                    const actors::AttemptInputs& inputs) {
  TaskContext context;
  context.id_ = task.id;
  context.type_ = task.type;
  context.payload_ = payload;
  context.attempt_ = task.attempt;
  context.max_attempts_ = task.max_attempts;
  context.priority_ = task.priority;
  context.idempotency_key_ = idempotency_key;
  context.group_ = group;
  context.control_ = control;
  context.previous_attempt_interrupted_ = task.previous_attempt_interrupted;
  context.max_result_bytes_ = inputs.max_result_bytes;
  context.dependencies_ = inputs.dependencies;
  return context;
}

namespace actors {
namespace {

// Calls a piece of user code that may throw; a throw becomes an error.
template <class Fn>
Status Guarded(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Status::Aborted(std::string(what) + " threw: " + e.what());
  } catch (...) {
    return Status::Aborted(std::string(what) +
                           " threw a non-standard exception");
  }
}

// Decides whether a failed attempt may be retried, and after what delay.
void ShapeFailure(const HandlerOptions& options,
                  internal::AttemptControl* control, Outcome* outcome) {
  if (outcome->status.IsCancelled() ||
      (control != nullptr && control->cancelled() && !outcome->timed_out)) {
    outcome->cancelled = true;
    return;
  }
  if (options.retry_if) {
    bool retry = false;
    Status s = Guarded("the retry filter", [&] {
      retry = options.retry_if(outcome->status);
      return Status::OK();
    });
    if (!s.ok() || !retry) outcome->permanent = true;
  }
  if (control != nullptr) {
    if (auto delay = control->retry_delay()) outcome->delay_us = delay->count();
  }
  if (!outcome->delay_us && options.retry_delay) {
    std::optional<Duration> delay;
    Status s = Guarded("the retry delay function", [&] {
      delay = options.retry_delay(outcome->status);
      return Status::OK();
    });
    // A delay function that throws falls back to the policy.
    if (s.ok() && delay) outcome->delay_us = delay->count();
  }
}

// Takes what the handler asked for beyond its status, under the control's
// lock once: a deferral or a snooze (true: the outcome is complete), else
// the hand-off and result of a success. A snooze past the bound turns into
// a failure of the attempt.
bool TakeRequests(const ClaimedTask& task, const AttemptInputs& inputs,
                  internal::AttemptControl* control, Outcome* outcome) {
  if (control == nullptr) return false;
  internal::AttemptControl::Requests asked = control->TakeRequests();
  if (asked.deferred_gate) {
    outcome->deferred_until_gate = std::move(asked.deferred_gate);
    return true;
  }
  if (asked.snooze && !control->cancelled()) {
    if (task.snoozes < inputs.max_snoozes) {
      outcome->snooze_us = asked.snooze->count();
      return true;
    }
    outcome->status =
        Status::Aborted("snoozed " + std::to_string(task.snoozes) +
                        " times, the most runtime.max_snoozes allows (" +
                        std::to_string(inputs.max_snoozes) +
                        "); this snooze counts as a failed attempt");
    return false;
  }
  if (outcome->status.ok()) {
    outcome->handoff_reference = std::move(asked.handoff);
    outcome->result = std::move(asked.result);
  }
  return false;
}

// Runs the handler in `context`, then shapes `outcome`: the handler's
// requests (hand-off, deferral, snooze, result) taken, an error returned
// while the runtime stops turned into a give-back, a failure shaped by the
// handler's options. Local and leased attempts alike.
Outcome RunHandler(const RegisteredHandler& entry, const ClaimedTask& task,
                   TaskContext& context, internal::AttemptControl* control,
                   const AttemptInputs& inputs, Outcome outcome) {
  outcome.status =
      Guarded("the handler", [&] { return entry.handler(context); });
  if (TakeRequests(task, inputs, control, &outcome)) return outcome;
  if (outcome.status.ok()) return outcome;
  if (control != nullptr && control->stop_requested() &&
      !control->cancelled()) {
    // Gave up because the runtime is stopping: the task goes back.
    outcome.stopped = true;
    return outcome;
  }
  ShapeFailure(entry.options, control, &outcome);
  return outcome;
}

}  // namespace

Outcome RunAttempt(const HandlerRegistry& registry, const ClaimedTask& task,
                   const storage::fb::TaskSpec& spec,
                   internal::AttemptControl* control,
                   const AttemptInputs& inputs) {
  Outcome outcome;
  outcome.id = task.id;
  outcome.attempt = task.attempt;
  auto it = registry.find(task.type);
  if (it == registry.end()) {
    outcome.status = Status::NotFound(
        "no handler is registered for task type '" + task.type + "'");
    outcome.permanent = true;
    return outcome;
  }
  const RegisteredHandler& entry = it->second;
  const HandlerOptions& options = entry.options;

  std::string migrated;
  const std::string_view stored_payload = storage::SpecPayload(spec);
  std::string_view payload = stored_payload;
  const uint32_t payload_version = spec.payload_version();
  if (payload_version > options.version) {
    outcome.status = Status::NotSupported(
        "payload version " + std::to_string(payload_version) +
        " is newer than the handler's version " +
        std::to_string(options.version));
    outcome.permanent = true;
    return outcome;
  }
  if (payload_version < options.version && options.migrate) {
    Status s = Guarded("the payload migration", [&]() -> Status {
      Result<std::string> result =
          options.migrate(payload_version, stored_payload);
      if (!result.ok()) return result.status();
      migrated = std::move(result).value();
      return Status::OK();
    });
    if (!s.ok()) {
      outcome.status = s.WithContext("migrating the payload from version " +
                                     std::to_string(payload_version));
      outcome.permanent = true;
      return outcome;
    }
    payload = migrated;
  }

  TaskContext context =
      TaskContextBuilder::For(task, spec, payload, control, inputs);
  std::optional<AdmittedBuckets> admitted;
  if (!AdmitByRate(inputs.rate_buckets, task, context, &admitted, &outcome)) {
    return outcome;
  }
  if (admitted) TaskContextBuilder::HoldWith(context, &*admitted);
  if (inputs.on_start != nullptr) inputs.on_start->Starting();
  return RunHandler(entry, task, context, control, inputs, std::move(outcome));
}

bool AdmitByRate(RateBuckets* buckets, const ClaimedTask& task,
                 const TaskContext& context,
                 std::optional<AdmittedBuckets>* admitted, Outcome* outcome) {
  if (buckets == nullptr || buckets->empty() ||
      !buckets->LimitsType(task.type)) {
    return true;
  }
  RateBuckets::Verdict verdict = buckets->Admit(task.id, task.type, context);
  if (!verdict.status.ok()) {
    // A key function failed: the attempt fails (and counts) without its
    // handler, and the policy retries it.
    outcome->status = std::move(verdict.status);
    return false;
  }
  if (verdict.wait_until_us != 0) {
    outcome->started = false;
    outcome->given_back = DeferReason::kRateLimited;
    outcome->given_back_until_us = verdict.wait_until_us;
    return false;
  }
  admitted->emplace(buckets, std::move(verdict.buckets));
  return true;
}

Outcome RunLeasedAttempt(const RegisteredHandler& entry,
                         const ClaimedTask& task, std::string_view payload,
                         std::string_view group,
                         std::string_view idempotency_key,
                         internal::AttemptControl* control,
                         const AttemptInputs& inputs) {
  Outcome outcome;
  outcome.id = task.id;
  outcome.attempt = task.attempt;
  TaskContext context = TaskContextBuilder::For(
      task, payload, group, idempotency_key, control, inputs);
  return RunHandler(entry, task, context, control, inputs, std::move(outcome));
}

}  // namespace actors
}  // namespace spool

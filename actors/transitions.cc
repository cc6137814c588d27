#include "actors/transitions.h"

#include <algorithm>

namespace spool::actors {
namespace {

// The longest delay any retry gets: 365 days.
constexpr int64_t kMaxRetryDelayUs = int64_t{365} * 24 * 3600 * 1000000;

// Fails the attempt: another one if the policy allows it, else failed.
void FailAttempt(storage::StateRecord* record, std::string_view error,
                 bool permanent, int64_t now_us, double unit_random,
                 std::optional<int64_t> delay_override_us = std::nullopt) {
  storage::RecordFailure(record, record->attempts, now_us, error);
  record->updated_us = now_us;
  bool retry = !permanent && record->retry.kind != RetryPolicy::Kind::kNone &&
               record->attempts < record->max_attempts;
  if (!retry) {
    record->status = TaskStatus::kFailed;
    record->next_attempt_us = 0;
    return;
  }
  Duration delay =
      delay_override_us
          ? Duration(
                std::clamp<int64_t>(*delay_override_us, 0, kMaxRetryDelayUs))
          : record->retry.DelayAfter(record->attempts, unit_random);
  record->status = TaskStatus::kRetryScheduled;
  // With no delay the task is ready at once, in its original place: a retry
  // keeps its priority and enqueue sequence.
  record->next_attempt_us = delay.count() > 0 ? now_us + delay.count() : 0;
}

}  // namespace

DependencyVerdict JudgeDependencies(const std::vector<DependencyState>& deps,
                                    DependencyFailure policy) {
  bool all_finished = true;
  bool all_succeeded = true;
  std::string culprit;
  for (const DependencyState& dep : deps) {
    if (!dep.status) {
      if (culprit.empty()) {
        culprit = "dependency " + std::to_string(dep.id) + " does not exist";
      }
      all_succeeded = false;
      continue;
    }
    TaskStatus status = *dep.status;
    if (status == TaskStatus::kSucceeded) continue;
    all_succeeded = false;
    if (status == TaskStatus::kFailed || status == TaskStatus::kCancelled) {
      if (culprit.empty()) {
        culprit = "dependency " + std::to_string(dep.id) + " " +
                  (status == TaskStatus::kFailed ? "failed" : "was cancelled");
      }
    } else {
      all_finished = false;
    }
  }
  if (all_succeeded) return {DependencyVerdict::Kind::kReady, ""};
  if (culprit.empty()) return {DependencyVerdict::Kind::kWait, ""};
  switch (policy) {
    case DependencyFailure::kCancel:
      return {DependencyVerdict::Kind::kCancel, culprit};
    case DependencyFailure::kFail:
      return {DependencyVerdict::Kind::kFail, culprit};
    case DependencyFailure::kRun:
      break;
  }
  return {all_finished ? DependencyVerdict::Kind::kReady
                       : DependencyVerdict::Kind::kWait,
          ""};
}

void ApplyVerdict(storage::StateRecord* record,
                  const DependencyVerdict& verdict, int64_t now_us) {
  record->updated_us = now_us;
  switch (verdict.kind) {
    case DependencyVerdict::Kind::kReady:
      record->status = TaskStatus::kPending;
      // A run_at still in the future keeps the task timed.
      if (record->next_attempt_us != 0 && record->next_attempt_us <= now_us) {
        record->next_attempt_us = 0;
      }
      return;
    case DependencyVerdict::Kind::kWait:
      record->status = TaskStatus::kWaiting;
      return;
    case DependencyVerdict::Kind::kCancel:
      record->status = TaskStatus::kCancelled;
      record->last_error = verdict.reason;
      record->next_attempt_us = 0;
      return;
    case DependencyVerdict::Kind::kFail:
      record->status = TaskStatus::kFailed;
      record->last_error = verdict.reason;
      record->next_attempt_us = 0;
      return;
  }
}

bool IsActive(const storage::StateRecord& record) {
  return !IsTerminal(record.status);
}

void CancelNow(storage::StateRecord* record, std::string_view reason,
               int64_t now_us) {
  record->status = TaskStatus::kCancelled;
  record->next_attempt_us = 0;
  record->handoff_reference.clear();
  if (!reason.empty()) record->last_error = std::string(reason);
  record->updated_us = now_us;
}

void PrepareManualRetry(storage::StateRecord* record,
                        const std::optional<RetryPolicy>& policy,
                        int64_t now_us) {
  if (policy) {
    record->retry = *policy;
    record->max_attempts =
        policy->kind == RetryPolicy::Kind::kNone ? 1 : policy->max_attempts;
  }
  record->attempts = 0;
  record->snoozes = 0;
  record->interrupted_attempts = 0;
  record->result.reset();
  record->cancel_requested = false;
  record->handoff_reference.clear();
  record->next_attempt_us = 0;
  record->updated_us = now_us;
}

void HoldTask(storage::StateRecord* record, int64_t now_us) {
  record->status = TaskStatus::kHeld;
  record->updated_us = now_us;
}

NewRecords NewRecord(const NewTask& task, uint64_t sequence, int64_t now_us,
                     const DependencyVerdict& verdict, std::string stored_group,
                     std::string stored_dedup_key) {
  NewRecords out;
  storage::SpecRecord& spec = out.spec;
  spec.id = task.id;
  spec.type = task.type;
  spec.payload = task.payload;
  spec.created_us = now_us;
  spec.group = task.group;
  spec.dedup_key = task.dedup_key;
  spec.idempotency_key = task.idempotency_key;
  spec.payload_version = task.payload_version;
  spec.periodic_name = task.periodic_name;
  spec.periodic_slot_us = task.periodic_slot_us;

  storage::StateRecord& record = out.state;
  record.id = task.id;
  record.status = TaskStatus::kPending;
  record.attempts = 0;
  record.max_attempts =
      task.retry.kind == RetryPolicy::Kind::kNone ? 1 : task.retry.max_attempts;
  record.updated_us = now_us;
  record.next_attempt_us = task.run_at_us > now_us ? task.run_at_us : 0;
  record.retry = task.retry;
  record.type = task.type;
  record.priority = task.priority;
  record.sequence = sequence;
  record.stored_group = std::move(stored_group);
  record.stored_dedup_key = std::move(stored_dedup_key);
  record.depends_on = task.depends_on;
  record.on_dependency_failure = task.on_dependency_failure;
  record.timeout_us = task.timeout_us;
  record.unique_for_us = task.unique_for_us;
  if (!record.depends_on.empty()) ApplyVerdict(&record, verdict, now_us);
  return out;
}

bool IsQueued(const storage::StateRecord& record) {
  return record.status == TaskStatus::kPending ||
         record.status == TaskStatus::kRetryScheduled;
}

QueueEntry QueueEntryOf(const storage::StateRecord& record) {
  return QueueEntry{record.id,       record.priority,
                    record.sequence, record.next_attempt_us,
                    record.type,     record.stored_group};
}

void Claim(storage::StateRecord* record, int64_t now_us) {
  record->status = TaskStatus::kRunning;
  record->attempts += 1;
  record->updated_us = now_us;
  record->next_attempt_us = 0;
}

bool OutcomeMatches(const storage::StateRecord& record,
                    const Outcome& outcome) {
  return record.status == TaskStatus::kRunning &&
         record.attempts == outcome.attempt;
}

void ReturnUnstarted(storage::StateRecord* record, int64_t now_us) {
  if (record->attempts > 0) record->attempts -= 1;
  if (record->cancel_requested) {
    CancelNow(record, "cancelled before the attempt started", now_us);
    return;
  }
  record->status =
      record->attempts > 0 ? TaskStatus::kRetryScheduled : TaskStatus::kPending;
  record->next_attempt_us = 0;
  record->handoff_reference.clear();
  record->updated_us = now_us;
}

void Settle(storage::StateRecord* record, const Outcome& outcome,
            int64_t now_us, double unit_random) {
  // Whoever leased the attempt holds it no longer.
  record->lease_node.clear();
  record->lease_deadline_us = 0;
  if (!outcome.started || outcome.stopped) {
    ReturnUnstarted(record, now_us);
    if (!outcome.started && outcome.given_back_until_us > now_us &&
        record->status != TaskStatus::kCancelled) {
      record->next_attempt_us = outcome.given_back_until_us;
    }
    return;
  }
  if (outcome.interrupted) {
    Interrupt(record, now_us, unit_random);
    return;
  }
  if (outcome.deferred_until_gate && !record->cancel_requested) {
    // Back to the queue in its place; the attempt did not happen.
    record->status = TaskStatus::kPending;
    if (record->attempts > 0) record->attempts -= 1;
    record->next_attempt_us = 0;
    record->handoff_reference.clear();
    record->updated_us = now_us;
    return;
  }
  if (outcome.snooze_us && !record->cancel_requested) {
    // Pending again, due later; the attempt did not happen.
    record->status = TaskStatus::kPending;
    if (record->attempts > 0) record->attempts -= 1;
    record->snoozes += 1;
    record->next_attempt_us =
        *outcome.snooze_us > 0 ? now_us + *outcome.snooze_us : 0;
    record->handoff_reference.clear();
    record->updated_us = now_us;
    return;
  }
  if (outcome.status.ok() && outcome.handoff_reference) {
    // Still running, but elsewhere: the worker's slot is free.
    record->handoff_reference = *outcome.handoff_reference;
    record->updated_us = now_us;
    return;
  }
  record->handoff_reference.clear();
  if (outcome.status.ok()) {
    record->status = TaskStatus::kSucceeded;
    record->result = outcome.result;
    record->last_error.clear();
    record->updated_us = now_us;
    record->next_attempt_us = 0;
    return;
  }
  if (outcome.cancelled || record->cancel_requested) {
    CancelNow(record, outcome.status.message(), now_us);
    storage::RecordFailure(record, record->attempts, now_us,
                           outcome.status.message());
    return;
  }
  FailAttempt(record, outcome.status.message(), outcome.permanent, now_us,
              unit_random, outcome.delay_us);
}

void Interrupt(storage::StateRecord* record, int64_t now_us,
               double unit_random) {
  record->interrupted_attempts += 1;
  record->lease_node.clear();
  record->lease_deadline_us = 0;
  if (record->cancel_requested) {
    if (record->attempts == 0) record->attempts = 1;
    storage::RecordFailure(record, record->attempts, now_us, kInterruptedError);
    CancelNow(record, kInterruptedError, now_us);
    return;
  }
  // A task claimed by a spool that crashed before counting attempts at claim
  // time cannot exist, but a zero would let a crash loop run forever.
  if (record->attempts == 0) record->attempts = 1;
  FailAttempt(record, kInterruptedError, /*permanent=*/false, now_us,
              unit_random);
}

}  // namespace spool::actors

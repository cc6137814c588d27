#include "actors/transitions.h"

namespace spool::actors {
namespace {

// Fails the attempt: another one if the policy allows it, else failed.
void FailAttempt(storage::TaskRecord* record, std::string_view error,
                 bool permanent, int64_t now_us, double unit_random) {
  storage::RecordFailure(record, record->attempts, now_us, error);
  record->updated_us = now_us;
  bool retry = !permanent && record->retry.kind != RetryPolicy::Kind::kNone &&
               record->attempts < record->max_attempts;
  if (!retry) {
    record->status = TaskStatus::kFailed;
    record->next_attempt_us = 0;
    return;
  }
  Duration delay = record->retry.DelayAfter(record->attempts, unit_random);
  record->status = TaskStatus::kRetryScheduled;
  // With no delay the task is ready at once, in its original place: a retry
  // keeps its priority and enqueue sequence.
  record->next_attempt_us = delay.count() > 0 ? now_us + delay.count() : 0;
}

}  // namespace

storage::TaskRecord NewRecord(const NewTask& task, uint64_t sequence,
                              int64_t now_us) {
  storage::TaskRecord record;
  record.id = task.id;
  record.type = task.type;
  record.payload = task.payload;
  record.status = TaskStatus::kPending;
  record.priority = task.priority;
  record.attempts = 0;
  record.max_attempts =
      task.retry.kind == RetryPolicy::Kind::kNone ? 1 : task.retry.max_attempts;
  record.created_us = now_us;
  record.updated_us = now_us;
  record.next_attempt_us = task.run_at_us > now_us ? task.run_at_us : 0;
  record.sequence = sequence;
  record.retry = task.retry;
  return record;
}

bool IsQueued(const storage::TaskRecord& record) {
  return record.status == TaskStatus::kPending ||
         record.status == TaskStatus::kRetryScheduled;
}

QueueEntry QueueEntryOf(const storage::TaskRecord& record) {
  return QueueEntry{record.id,       record.priority,
                    record.sequence, record.next_attempt_us,
                    record.type,     record.group};
}

void Claim(storage::TaskRecord* record, int64_t now_us) {
  record->status = TaskStatus::kRunning;
  record->attempts += 1;
  record->updated_us = now_us;
  record->next_attempt_us = 0;
}

bool OutcomeMatches(const storage::TaskRecord& record, const Outcome& outcome) {
  return record.status == TaskStatus::kRunning &&
         record.attempts == outcome.attempt;
}

void Settle(storage::TaskRecord* record, const Outcome& outcome, int64_t now_us,
            double unit_random) {
  if (outcome.status.ok()) {
    record->status = TaskStatus::kSucceeded;
    record->last_error.clear();
    record->updated_us = now_us;
    record->next_attempt_us = 0;
    return;
  }
  FailAttempt(record, outcome.status.message(), outcome.permanent, now_us,
              unit_random);
}

void Interrupt(storage::TaskRecord* record, int64_t now_us,
               double unit_random) {
  // A task claimed by a spool that crashed before counting attempts at claim
  // time cannot exist, but a zero would let a crash loop run forever.
  if (record->attempts == 0) record->attempts = 1;
  FailAttempt(record, kInterruptedError, /*permanent=*/false, now_us,
              unit_random);
}

}  // namespace spool::actors

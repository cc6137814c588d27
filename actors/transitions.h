// The state machine of a task record: how each event changes it.
//
// Pure functions, with no actors and no storage, so that the rules can be
// read, and tested, on their own. The writer applies them inside its group
// commit.

#ifndef SPOOL_ACTORS_TRANSITIONS_H_
#define SPOOL_ACTORS_TRANSITIONS_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "actors/messages.h"
#include "storage/record.h"

namespace spool::actors {

// The error stored for an attempt that a crash interrupted: the public
// constant (spool/task.h), which the contract promises.
inline constexpr std::string_view kInterruptedError = kInterruptedAttemptError;

// A dependency as the writer found it: its status, or nothing when it does
// not exist.
struct DependencyState {
  TaskId id = 0;
  std::optional<TaskStatus> status;
};

// What a task's dependencies allow.
struct DependencyVerdict {
  enum class Kind { kReady, kWait, kCancel, kFail };
  Kind kind = Kind::kReady;
  // For kCancel and kFail: which dependency, and what happened to it.
  std::string reason;
};

// Applies `policy` to the dependencies' states. A missing dependency counts
// as one that failed.
DependencyVerdict JudgeDependencies(const std::vector<DependencyState>& deps,
                                    DependencyFailure policy);

// The stored values of a new task.
struct NewRecords {
  storage::SpecRecord spec;
  storage::StateRecord state;
};

// The values of a new task for `task`, with its dependencies judged: pending
// (at once or at its run_at time), waiting, or cancelled/failed because of a
// dependency. `stored_group` and `stored_dedup_key` are the group and dedup
// key in stored form (TaskStore::StoredGroup, StoredDedupKey).
NewRecords NewRecord(const NewTask& task, uint64_t sequence, int64_t now_us,
                     const DependencyVerdict& verdict, std::string stored_group,
                     std::string stored_dedup_key);

// Moves a waiting (or just released, or manually retried) task to where its
// dependencies' verdict puts it.
void ApplyVerdict(storage::StateRecord* record,
                  const DependencyVerdict& verdict, int64_t now_us);

// Active: not succeeded, failed or cancelled.
bool IsActive(const storage::StateRecord& record);

// Cancels a task that is not running. REQUIRES: IsActive(*record).
void CancelNow(storage::StateRecord* record, std::string_view reason,
               int64_t now_us);

// Prepares a failed or cancelled task to run again: a fresh attempt budget,
// optionally a new policy; its place in the order is kept.
void PrepareManualRetry(storage::StateRecord* record,
                        const std::optional<RetryPolicy>& policy,
                        int64_t now_us);

// Parks a task (Hold), or returns it (Release: the verdict of its
// dependencies decides where).
void HoldTask(storage::StateRecord* record, int64_t now_us);

// Pending or retry-scheduled: the scheduler may claim it.
bool IsQueued(const storage::StateRecord& record);

// The record's place in the queue. REQUIRES: IsQueued(record).
QueueEntry QueueEntryOf(const storage::StateRecord& record);

// Claims the task for an attempt: running, the attempt counted (so that a
// crash during it still consumes it). REQUIRES: IsQueued(*record).
void Claim(storage::StateRecord* record, int64_t now_us);

// Applies the outcome of the running attempt: succeeded, with its result;
// or, after a failure, retry-scheduled when the policy allows another
// attempt, else failed; or, for an attempt that never started, was
// deferred or snoozed, back to the queue (or cancelled) with the attempt
// not counted (a snooze counts one more snooze and sets the due time; the
// worker applied the max_snoozes bound). `unit_random` in [0, 1) drives
// jitter.
// REQUIRES: the task is running the attempt the outcome names.
void Settle(storage::StateRecord* record, const Outcome& outcome,
            int64_t now_us, double unit_random);

// Records an attempt that a crash interrupted (counted in attempts and in
// interrupted_attempts, with a kInterruptedError failure line), then
// reschedules the task or
// fails it when it is out of attempts; a task asked to stop is cancelled
// instead. REQUIRES: status running, not handed off.
void Interrupt(storage::StateRecord* record, int64_t now_us,
               double unit_random);

// Gives back an attempt that was claimed but never started: not counted,
// and the task back in its place in the queue, or cancelled when a cancel
// was asked meanwhile. REQUIRES: status running, not handed off.
void ReturnUnstarted(storage::StateRecord* record, int64_t now_us);

// True when `outcome` belongs to the attempt the task is running.
bool OutcomeMatches(const storage::StateRecord& record, const Outcome& outcome);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_TRANSITIONS_H_

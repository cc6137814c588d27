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

// The error stored for an attempt that a crash interrupted.
inline constexpr std::string_view kInterruptedError =
    "interrupted: the process stopped while the task was running";

// A new record for `task`: pending, at once or at its run_at time.
storage::TaskRecord NewRecord(const NewTask& task, uint64_t sequence,
                              int64_t now_us);

// Pending or retry-scheduled: the scheduler may claim it.
bool IsQueued(const storage::TaskRecord& record);

// The record's place in the queue. REQUIRES: IsQueued(record).
QueueEntry QueueEntryOf(const storage::TaskRecord& record);

// Claims the task for an attempt: running, the attempt counted (so that a
// crash during it still consumes it). REQUIRES: IsQueued(*record).
void Claim(storage::TaskRecord* record, int64_t now_us);

// Applies the outcome of the running attempt: succeeded; or, after a failure,
// retry-scheduled when the policy allows another attempt, else failed.
// `unit_random` in [0, 1) drives jitter. REQUIRES: the record is running the
// attempt the outcome names.
void Settle(storage::TaskRecord* record, const Outcome& outcome, int64_t now_us,
            double unit_random);

// Records an attempt that a crash interrupted, then reschedules the task or
// fails it when it is out of attempts. REQUIRES: status running.
void Interrupt(storage::TaskRecord* record, int64_t now_us, double unit_random);

// True when `outcome` belongs to the attempt the record is running.
bool OutcomeMatches(const storage::TaskRecord& record, const Outcome& outcome);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_TRANSITIONS_H_

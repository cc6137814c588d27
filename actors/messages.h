// The data carried by messages between spool's actors.
//
// Every message is local to one process, so the types are registered as
// unsafe (not serializable) message types instead of being given inspect()
// overloads. Completions are plain callbacks: the actor that finishes a
// command calls them on its own thread, and they must not block.

#ifndef SPOOL_ACTORS_MESSAGES_H_
#define SPOOL_ACTORS_MESSAGES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <spool/status.h>
#include <spool/task.h>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "storage/record.h"
#include "storage/task_store.h"

namespace spool::actors {

// ---- Atoms (at most 10 characters each in CAF 0.17) ----

using enqueue_atom = caf::atom_constant<caf::atom("enqueue")>;
using claim_atom = caf::atom_constant<caf::atom("claim")>;
using settle_atom = caf::atom_constant<caf::atom("settle")>;
using recover_atom = caf::atom_constant<caf::atom("recover")>;
using barrier_atom = caf::atom_constant<caf::atom("barrier")>;
using attach_atom = caf::atom_constant<caf::atom("attach")>;
using commit_atom = caf::atom_constant<caf::atom("commit")>;
using changes_atom = caf::atom_constant<caf::atom("changes")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using outcome_atom = caf::atom_constant<caf::atom("outcome")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using dispatch_atom = caf::atom_constant<caf::atom("dispatch")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using read_atom = caf::atom_constant<caf::atom("read")>;
using idle_atom = caf::atom_constant<caf::atom("idle")>;
using changed_atom = caf::atom_constant<caf::atom("changed")>;

// ---- Payloads ----

// Called once when a command is finished: OK, or why it failed.
using Completion = std::function<void(const Status&)>;

// A task validated on the caller's thread, ready to be stored.
struct NewTask {
  TaskId id = 0;
  std::string type;
  std::string payload;
  int32_t priority = 0;
  RetryPolicy retry;
  // 0: may start at once.
  int64_t run_at_us = 0;
};

// Stores tasks, all or none, then calls `done`.
struct EnqueueCommand {
  std::vector<NewTask> tasks;
  Completion done;
};

// A task's place in the queue: what the scheduler orders by.
struct QueueEntry {
  TaskId id = 0;
  int32_t priority = 0;
  uint64_t sequence = 0;
  // 0: ready now; else the time it becomes due.
  int64_t due_us = 0;
  // For per-type and per-group limits and fair rotation between groups.
  std::string type;
  std::string group;
};

// A claim that committed: the task is `running` on disk and may start.
struct ClaimedTask {
  std::shared_ptr<const storage::TaskRecord> record;
};

// The end of one attempt, as a worker reports it.
struct Outcome {
  TaskId id = 0;
  // The attempt this outcome belongs to; a stale outcome is ignored.
  uint32_t attempt = 0;
  // OK: the task succeeded. Otherwise the attempt failed with this error.
  Status status;
  // The failure must not be retried (e.g. no handler for the type).
  bool permanent = false;
};

// Records the interrupted attempts of tasks a crash left running.
struct RecoverCommand {
  std::vector<TaskId> running;
  // Called with the number of tasks recovered, or the error.
  std::function<void(const Result<size_t>&)> done;
};

// What recovery found: the interrupted attempts it recorded, and the queue
// as storage holds it afterwards.
struct RecoveryResult {
  size_t interrupted = 0;
  std::vector<QueueEntry> queue;
};

// Runs recovery once and calls `done` with its result.
struct RecoveryJob {
  std::function<void(const Result<RecoveryResult>&)> done;
};

// What one group commit changed in the queue, sent to the scheduler.
struct QueueChanges {
  // Tasks that may now be claimed, at once or at their due time.
  std::vector<QueueEntry> queued;
  // Tasks that left the queue without being claimed here.
  std::vector<TaskId> dequeued;
  // Claims that committed; their tasks may start.
  std::vector<ClaimedTask> claimed;
  // Claims that were refused: the task was gone, not claimable, or corrupt.
  std::vector<TaskId> refused;
  // Claims whose write failed; the tasks go back to the queue.
  std::vector<QueueEntry> claim_failed;
  // Outcomes that committed.
  size_t settled = 0;
  // Outcomes whose write failed; the scheduler sends them again later,
  // without running the handler again.
  std::vector<Outcome> unsettled;
  // The error of a failed commit, OK otherwise.
  Status write_status;
};

// What one committed batch changed, for live queries: every task whose
// record changed, and the types, groups and statuses (before and after)
// involved. A query whose filters miss all of them cannot have changed.
struct ChangeSet {
  std::vector<TaskId> ids;
  std::vector<std::string> types;
  std::vector<std::string> groups;
  // Bit i set: some task entered or left TaskStatus i.
  uint32_t statuses = 0;
};

// A query to run on a consistent snapshot. `run` answers the caller itself;
// `fail` is called instead when the query cannot run (the runtime is closing
// or the reader died).
struct ReadJob {
  std::function<void(const storage::TaskStore::ReadView&)> run;
  std::function<void(const Status&)> fail;
};

}  // namespace spool::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::Completion)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::EnqueueCommand)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::QueueEntry)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<spool::actors::QueueEntry>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::ClaimedTask)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::Outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<spool::actors::Outcome>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::RecoverCommand)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::QueueChanges)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::RecoveryJob)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::Result<size_t>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::ReadJob)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::ChangeSet)

#endif  // SPOOL_ACTORS_MESSAGES_H_

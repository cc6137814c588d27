// The typed interface of every spool actor, in one place, so that the whole
// protocol can be read in one sitting. One line per message says what it
// asks. The behaviours live in one file per actor.
//
//   caller threads --enqueue/barrier--> writer --changes--> scheduler
//   scheduler --claim/settle--> writer
//   scheduler --run--> idle worker; scheduler --> claimed pool --> busy
//   worker (no message); worker --outcome--> scheduler
//   caller threads --read--> reader pool --read--> reader
//   writer --changed--> watcher --read--> reader pool; reader --watched-->
//   watcher --> subscribers, for live queries
//   recovery --recover--> writer --recovered--> recovery, at open
//   remote worker --hello/heartbeat/outcome--> gateway --lease/revoke-->
//   remote worker; scheduler --run--> remote slot --lease--> gateway;
//   gateway --attach/detach/outcome--> scheduler (docs/scale-out.md)
//   a standby's transport --apply/rebase--> replica (docs/replication.md)

#ifndef SPOOL_ACTORS_ACTORS_H_
#define SPOOL_ACTORS_ACTORS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/messages.h"

namespace spool::actors {

// Runs handlers, one task at a time. Detached: a handler may block.
using worker_actor = caf::typed_actor<
    // Runs one attempt of a claimed task and reports its outcome, then goes
    // on with the tasks claimed ahead in the pool until it is empty.
    caf::reacts_to<run_atom, ClaimedTask>>;

// Worker slots served by a remote worker, added to the scheduler's workers
// while its connection lasts. `attached` is called on the scheduler's thread
// with the index of the first slot; the others follow in order.
struct RemoteSlots {
  // The gateway's session: detach_atom names it.
  uint64_t session = 0;
  std::vector<worker_actor> slots;
  // The task types the worker declared: its slots are sent only these.
  std::vector<std::string> types;
  std::function<void(uint32_t first_index)> attached;
};

// Sent with start: everything known only once handlers are registered.
struct DispatchConfig {
  std::vector<worker_actor> workers;
  std::unordered_map<std::string, TypePolicy> types;
  std::vector<PeriodicPlan> periodic;
};

// Owns the ready order, the timers and the concurrency limit.
using scheduler_actor = caf::typed_actor<
    // What a commit changed: new, claimed, settled or removed tasks.
    caf::reacts_to<changes_atom, QueueChanges>,
    // Starts dispatching to these workers, under these limits.
    caf::reacts_to<start_atom, DispatchConfig>,
    // Starts dispatching again after a stop that was not a close
    // (Runtime::Start after Runtime::Stop).
    caf::reacts_to<start_atom>,
    // Worker `index` finished an attempt; `idle` when it found no claimed
    // task in the pool to go on with, and waits for one.
    caf::reacts_to<outcome_atom, uint32_t, Outcome, bool>,
    // Several of those at once (the remote workers' gateway).
    caf::reacts_to<outcome_atom, std::vector<WorkerOutcome>>,
    // A timer fired, or the clock jumped: move due tasks to ready.
    caf::reacts_to<tick_atom>,
    // Calls back once no task is ready, claimed or running (and, if asked,
    // none is due later), or at the request's timeout.
    caf::reacts_to<drain_atom, DrainRequest>,
    // Internal: drain request `id`'s timeout passed.
    caf::reacts_to<drain_atom, uint64_t>,
    // Stops dispatching; calls back once no handler runs. `closing`: for
    // good (Close); else (Runtime::Stop) the scheduler is idle afterwards,
    // until start_atom.
    caf::reacts_to<stop_atom, Completion, bool>,
    // Pauses (true) or resumes one task type, or all when the type is "".
    caf::reacts_to<pause_atom, std::string, bool>,
    // Sets a group's concurrency limit (0: back to the default).
    caf::reacts_to<limit_atom, std::string, uint32_t>,
    // Opens (true) or closes a gate.
    caf::reacts_to<gate_atom, std::string, bool>,
    // A control command for the writer (cancel, cancel group, hold): the
    // tasks it names that wait unstarted in the pool go back first, so
    // that the command finds them queued, not running.
    caf::reacts_to<control_atom, ControlCommand>,
    // Internal: sends the claims and outcomes gathered since the last one.
    caf::reacts_to<dispatch_atom>,
    // A remote worker connected: these slots take claims like workers.
    caf::reacts_to<attach_atom, RemoteSlots>,
    // A remote worker (by session) is gone: its slots take no more claims.
    caf::reacts_to<detach_atom, uint64_t>>;

// Receives what each commit changed, for live queries.
using change_listener_actor = caf::typed_actor<
    // A batch committed with these changes.
    caf::reacts_to<changed_atom, ChangeSet>>;

// The only actor that writes. Detached: it waits for fsync.
using writer_actor = caf::typed_actor<
    // Stores new tasks atomically.
    caf::reacts_to<enqueue_atom, EnqueueCommand>,
    // Marks queued tasks running, so that they may start.
    caf::reacts_to<claim_atom, std::vector<QueueEntry>>,
    // Records the outcomes of attempts.
    caf::reacts_to<settle_atom, std::vector<Outcome>>,
    // Records the attempts a crash interrupted.
    caf::reacts_to<recover_atom, RecoverCommand>,
    // Cancels, retries, deletes, purges, holds or releases tasks.
    caf::reacts_to<control_atom, ControlCommand>,
    // Stores meta values (e.g. rate-limit state) with the next commit.
    caf::reacts_to<meta_atom, MetaUpdate>,
    // A clustered primary: epoch N starts with the next commit; calls back
    // after its local sync.
    caf::reacts_to<epoch_atom, uint64_t, Completion>,
    // Calls back once every earlier command is committed.
    caf::reacts_to<barrier_atom, Completion>,
    // Sends queue changes to this scheduler from now on.
    caf::reacts_to<attach_atom, scheduler_actor>,
    // Sends what each commit changed to this listener from now on.
    caf::reacts_to<attach_atom, change_listener_actor>,
    // Internal: commits the commands gathered since the last commit.
    caf::reacts_to<commit_atom>,
    // Durability::kReplicated: enough standbys acknowledged every commit up
    // to the position (the second) of the log (the first; the replication
    // log's on_acked). Those past where their log was retracted are
    // ignored.
    caf::reacts_to<replicated_atom, uint64_t, uint64_t>,
    // Internal: fails the commits whose standbys did not answer in time.
    caf::reacts_to<ack_check_atom>>;

// A standby's only writer: applies a primary's commits, or swaps in a new
// base. Detached: both wait for the disk.
using replica_actor = caf::typed_actor<
    // Applies these commits in order and syncs once.
    caf::reacts_to<apply_atom, ApplyJob>,
    // Replaces the store with a base backup.
    caf::reacts_to<rebase_atom, RebaseJob>>;

// Answers one query at a time on its own snapshot. Detached: reads may wait
// for the disk.
using reader_actor = caf::typed_actor<
    // Runs these queries one after another, then reports idle.
    caf::reacts_to<read_atom, ReadBatch>>;

// Queues queries and hands each to an idle reader.
using reader_pool_actor = caf::typed_actor<
    // Queues a query.
    caf::reacts_to<read_atom, ReadJob>,
    // Reader `index` finished its query.
    caf::reacts_to<idle_atom, uint32_t>,
    // Finishes the queued queries, then calls back and stops.
    caf::reacts_to<stop_atom, Completion>>;

// Keeps the live queries: runs each on the reader pool, re-runs those a
// commit may have changed (at most one run in flight per query), and hands
// changed results to their subscribers.
using watch_actor = caf::typed_actor<
    // A batch committed with these changes.
    caf::reacts_to<changed_atom, ChangeSet>,
    // Subscribes to a live query.
    caf::reacts_to<watch_atom, WatchRequest>,
    // Ends the subscription with this id.
    caf::reacts_to<unwatch_atom, uint64_t>,
    // A run finished on a reader.
    caf::reacts_to<watched_atom, WatchRun>,
    // Calls back with the counters.
    caf::reacts_to<stats_atom, WatchStatsCallback>,
    // Closes every subscription, then calls back and stops.
    caf::reacts_to<stop_atom, Completion>>;

// Runs once at open, before anything is dispatched. Detached: it scans
// storage.
using recovery_actor = caf::typed_actor<
    // Records the attempts a crash interrupted, then loads the queue.
    caf::reacts_to<recover_atom, RecoveryJob>,
    // The writer committed the interrupted attempts (what it did, or why
    // not).
    caf::reacts_to<recovered_atom, Result<Recovered>>>;

// Retention (actors/retention.h): never blocks, so on CAF's shared pool.
using retention_actor = caf::typed_actor<
    // The clock may have reached the next pass.
    caf::reacts_to<tick_atom>,
    // A purge step committed (what it did, or why not).
    caf::reacts_to<purged_atom, Result<ControlResult>>,
    // Sends no more steps; calls back once none is at the writer.
    caf::reacts_to<stop_atom, Completion>>;

// The remote workers' gateway (actors/gateway.h). Never published: its
// first three messages come from remote workers through its door
// (actors/gateway_door.h), which checked the hello's proof; the others are
// local.
using gateway_actor = caf::typed_actor<
    // A remote worker (`peer`) whose proof the door checked introduces
    // itself; the welcome names its session and the session's key.
    caf::replies_to<hello_atom, RemoteHello, caf::actor>::with<RemoteWelcome>,
    // The worker of this session (session, key) is alive: its leases are
    // extended.
    caf::reacts_to<heartbeat_atom, uint64_t, std::string>,
    // The worker of this session (session, key) finished these leased
    // attempts.
    caf::reacts_to<outcome_atom, uint64_t, std::string,
                   std::vector<RemoteOutcome>>,
    // The scheduler sent slot `index` of this session a claimed task to
    // run (from the slot's forwarding actor).
    caf::reacts_to<lease_atom, uint64_t, uint32_t, ClaimedTask>,
    // Internal: the lease timer; expires leases and passes on cancels.
    caf::reacts_to<tick_atom>,
    // Internal: sends each worker the leases gathered for it, in one
    // message.
    caf::reacts_to<flush_atom>,
    // Runtime::Start: hellos are accepted from now on (refused before, so
    // that remote slots are numbered after the local workers).
    caf::reacts_to<start_atom>,
    // Settles every lease as interrupted, tells remote workers their
    // sessions are over, and quits (Close).
    caf::reacts_to<stop_atom>>;

}  // namespace spool::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::DispatchConfig)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::RemoteSlots)

#endif  // SPOOL_ACTORS_ACTORS_H_

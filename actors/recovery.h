// Recovery: at open, before anything runs, finds every task a crash left
// running and has the writer record its interrupted attempt, all in one
// batch; then loads the queue for the scheduler. A claim the start log
// shows never started (storage/start_log.h) is given back instead, with no
// attempt spent.

#ifndef SPOOL_ACTORS_RECOVERY_H_
#define SPOOL_ACTORS_RECOVERY_H_

#include "actors/actors.h"
#include "storage/start_log.h"
#include "storage/task_store.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

// Spawns the recovery actor (detached: it scans storage). Send it one
// RecoveryJob; it answers and stops. `start_log` (null: none) holds what
// the previous process recorded of its starts.
recovery_actor SpawnRecovery(caf::actor_system& system,
                             const storage::TaskStore* store,
                             const storage::StartLog* start_log,
                             writer_actor writer);

// Reads the queue (ready and timed tasks) from the status index.
Result<std::vector<QueueEntry>> LoadQueue(const storage::TaskStore& store);

// Reads the scheduler's stored state (rate limits, periodic slots) into
// *result.
Status LoadSchedulerState(const storage::TaskStore& store,
                          RecoveryResult* result);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_RECOVERY_H_

// Recovery: at open, before anything runs, finds every task a crash left
// running and has the writer record its interrupted attempt, all in one
// batch; then loads the queue for the scheduler.

#ifndef SPOOL_ACTORS_RECOVERY_H_
#define SPOOL_ACTORS_RECOVERY_H_

#include "actors/actors.h"
#include "storage/task_store.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

// Spawns the recovery actor (detached: it scans storage). Send it one
// RecoveryJob; it answers and stops.
recovery_actor SpawnRecovery(caf::actor_system& system,
                             const storage::TaskStore* store,
                             writer_actor writer);

// Reads the queue (ready and timed tasks) from the index families.
Result<std::vector<QueueEntry>> LoadQueue(const storage::TaskStore& store);

// Reads the scheduler's stored state (rate limits, periodic slots) into
// *result.
Status LoadSchedulerState(const storage::TaskStore& store,
                          RecoveryResult* result);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_RECOVERY_H_

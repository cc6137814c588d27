// The replica: a standby's only writer (docs/replication.md). It applies
// the commits a primary's log hands the standby's transport, and swaps in a
// base backup when the standby cannot follow from where it is. Readers
// read the store meanwhile; a swap makes them wait for the new files.

#ifndef SPOOL_ACTORS_REPLICA_H_
#define SPOOL_ACTORS_REPLICA_H_

#include "actors/actors.h"
#include "storage/task_store.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

// Spawns the replica on a thread of its own (detached). `store` is not
// owned and outlives it.
replica_actor SpawnReplica(caf::actor_system& system,
                           storage::TaskStore* store);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_REPLICA_H_

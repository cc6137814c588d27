// Readers: a pool of actors answering queries on RocksDB snapshots.
//
// The pool actor holds the queue of waiting queries and hands each to an idle
// reader; each reader runs one query at a time on a fresh snapshot, on its
// own thread. A reader that dies is replaced, and the one query it held is
// failed; queued queries are never sent to a reader that is gone, because a
// reader is only handed work after it reported itself idle in its current
// life.

#ifndef SPOOL_ACTORS_READER_H_
#define SPOOL_ACTORS_READER_H_

#include "actors/actors.h"
#include "storage/task_store.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

struct ReaderPoolConfig {
  // Not owned; outlives the pool.
  const storage::TaskStore* store = nullptr;
  // Number of readers, >= 1.
  uint32_t readers = 2;
};

// Spawns the pool, which spawns its readers (detached: a read may wait for
// the disk).
reader_pool_actor SpawnReaderPool(caf::actor_system& system,
                                  ReaderPoolConfig config);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_READER_H_

// Readers: a pool of actors answering queries on RocksDB snapshots.
//
// The pool actor holds the queue of waiting queries and hands them to idle
// readers; each reader runs one query at a time, each on a fresh snapshot,
// on its own thread. When queries wait, an idle reader is handed a share of
// them in one message (a ReadBatch), which saves a thread wake-up per query
// under load; the snapshot of each is still taken after it was asked.
//
// A reader that dies is replaced, and nothing it held is lost: its queries
// are queued again at the front (a query only reads, so running it twice is
// harmless) unless they were already handed out kMaxReadDispatches times,
// in which case they fail with Aborted. Queries are only handed to a reader
// that reported itself idle in its current life; one that died before it
// could report is found out by its down message, never by a hang. An idle
// report from an earlier life of a slot is ignored.

#ifndef SPOOL_ACTORS_READER_H_
#define SPOOL_ACTORS_READER_H_

#include <functional>

#include "actors/actors.h"
#include "storage/task_store.h"
#include "util/metrics.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

// How often one query may be handed to a reader that then dies.
inline constexpr uint32_t kMaxReadDispatches = 3;

// The most queries handed to one reader in one message.
inline constexpr size_t kMaxReadBatch = 64;

struct ReaderPoolConfig {
  // Not owned; outlives the pool.
  const storage::TaskStore* store = nullptr;
  // Number of readers, >= 1.
  uint32_t readers = 2;
  // Test hook: called on the pool's thread with every reader it starts, the
  // first ones and each replacement, so that a test can kill one as a crash
  // of its thread would.
  std::function<void(uint32_t index, const reader_actor& reader)>
      on_reader_started;
  // Where the pool publishes how many queries wait. Null: nowhere.
  std::shared_ptr<metrics::Metrics> metrics;
};

// Spawns the pool on a thread of its own (so that a caller's message wakes
// it at once), and it spawns its readers (detached: a read may wait for the
// disk).
reader_pool_actor SpawnReaderPool(caf::actor_system& system,
                                  ReaderPoolConfig config);

// A ReadJob whose `fail` is also called, with Closed, if the job is dropped
// without having run (e.g. sent to a pool that has stopped), so that whoever
// waits on it always gets an answer. `fail` may then run on any thread.
ReadJob MakeReadJob(
    std::function<void(const storage::TaskStore::ReadView&)> run,
    std::function<void(const Status&)> fail);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_READER_H_

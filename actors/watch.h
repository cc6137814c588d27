// The watcher: the actor behind live queries.
//
// It keeps every watched query once, however many subscribers share it (by
// LiveQuery::key, compared in full), with the hash and the result of its
// last run. The writer sends it a ChangeSet after each commit; inverted
// indexes (task id, group, type, status) find the queries the change could
// affect, and only those run again, on the reader pool. At most one run per
// query is in flight: a change that arrives meanwhile marks the query dirty,
// and exactly one follow-up runs when the current run returns, however many
// changes came. A run whose result hashes like the last one delivers
// nothing.
//
// Ordering: runs of one query are sequential, each on a snapshot taken
// after the previous run returned, so results reach subscribers in snapshot
// order. A subscriber that joins a query already watched gets the last
// result at once if no run is in flight; otherwise it waits for the first
// run that sees every change made before it joined (the run in flight, or
// its follow-up if a change came after that run started), and gets that
// run's result even if more changes keep coming.

#ifndef SPOOL_ACTORS_WATCH_H_
#define SPOOL_ACTORS_WATCH_H_

#include "actors/actors.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

struct WatcherConfig {
  // Where the queries run.
  reader_pool_actor readers;
  // Set to the number of live queries the watcher holds, so that the writer
  // builds and sends a ChangeSet only when one may need it. Safe to skip at
  // zero: a query's first run reads a snapshot taken after it was counted.
  std::shared_ptr<std::atomic<size_t>> live_queries;
};

// Spawns the watcher on the actor scheduler: it never blocks.
watch_actor SpawnWatcher(caf::actor_system& system, WatcherConfig config);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_WATCH_H_

// The scheduler: owns the queue's order in memory and dispatches to workers.
//
// It keeps every queued task as a QueueEntry: ready ones ordered by priority
// (higher first) then enqueue sequence, and timed ones (delays, retries) by
// due time. Storage is read once, at open; afterwards the writer reports
// every change, so dispatch never touches RocksDB and never walks deleted
// index keys. Claims go to the writer, as many as there are idle workers,
// and claimed tasks go to workers; outcomes come back and go to the writer in
// batches, together with the next claims, so that one commit settles one
// task and claims the next.

#ifndef SPOOL_ACTORS_SCHEDULER_H_
#define SPOOL_ACTORS_SCHEDULER_H_

#include <chrono>
#include <memory>
#include <vector>

#include <spool/clock.h>

#include "actors/actors.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

struct SchedulerConfig {
  writer_actor writer;
  std::shared_ptr<Clock> clock;
  // The queue as storage held it at open.
  std::vector<QueueEntry> initial;
  // How long to wait before claiming again after a failed write.
  std::chrono::milliseconds storage_retry_delay{100};
};

// Spawns the scheduler on the actor system's shared threads: it never
// blocks.
scheduler_actor SpawnScheduler(caf::actor_system& system,
                               SchedulerConfig config);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_SCHEDULER_H_

// The worker: runs handlers, one attempt at a time, on its own thread.

#ifndef SPOOL_ACTORS_WORKER_H_
#define SPOOL_ACTORS_WORKER_H_

#include <cstdint>
#include <memory>

#include <spool/clock.h>

#include "actors/actors.h"
#include "actors/claimed_pool.h"
#include "actors/handler_registry.h"
#include "storage/start_log.h"
#include "storage/task_store.h"
#include "util/metrics.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

struct WorkerConfig {
  uint32_t index = 0;
  scheduler_actor scheduler;
  std::shared_ptr<const HandlerRegistry> registry;
  // Where the worker reads each task's spec (its payload).
  const storage::TaskStore* store = nullptr;
  // Where it takes its next task when it finishes one.
  std::shared_ptr<ClaimedPool> pool;
  // Where it records each start (null: nowhere).
  storage::StartLog* start_log = nullptr;
  // The task clock, for the start time that timeouts run from.
  std::shared_ptr<Clock> clock;
  // Where the worker counts running handlers, start latencies and handler
  // times. Null: nowhere.
  std::shared_ptr<metrics::Metrics> metrics;
  // Options::max_result_bytes and max_snoozes, for the handlers.
  size_t max_result_bytes = 0;
  uint32_t max_snoozes = 0;
  // The named rate limits, asked before each attempt of a type they cover
  // (null: there are none).
  std::shared_ptr<RateBuckets> rate_buckets;
};

// Spawns a worker on a thread of its own (detached): a handler may block.
// Given a task, it runs it, then goes on with the tasks in the pool until
// the pool is empty, reporting each outcome to the scheduler. Before a task
// with dependencies runs, it reads their states (how they ended).
worker_actor SpawnWorker(caf::actor_system& system, WorkerConfig config);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_WORKER_H_

// The writer: the only actor that changes storage.
//
// Group commit: every command waiting in the writer's mailbox is applied to
// one WriteTxn as it arrives; a commit marker the writer sends itself on the
// first command of a batch reaches it after all of them, and then the batch
// is committed as one WriteBatch with one sync. Only then are the callers
// answered and the scheduler told what changed. Under load a batch is every
// command that arrived during the previous sync.

#ifndef SPOOL_ACTORS_WRITER_H_
#define SPOOL_ACTORS_WRITER_H_

#include <cstddef>
#include <functional>
#include <memory>

#include <spool/clock.h>
#include <spool/storage_health.h>

#include "actors/actors.h"
#include "actors/attempt_control.h"
#include "actors/lease_fence.h"
#include "actors/replication_log.h"
#include "actors/writer_stats.h"
#include "storage/task_store.h"
#include "util/metrics.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

struct WriterConfig {
  // Not owned; outlives the writer.
  storage::TaskStore* store = nullptr;
  std::shared_ptr<Clock> clock;
  // The most commands in one batch.
  size_t max_batch = 1024;
  // Receives the lifecycle events of each commit, after it is durable, on
  // the writer's thread (it must not block). Null: no events.
  std::function<void(std::vector<TaskEvent>)> on_events;
  // Whether anyone listens; events are not built otherwise.
  std::function<bool()> events_wanted;
  // Receives each failed commit and the first success after failures
  // (spool/storage_health.h), on the writer's thread (it must not block).
  // Null: not reported.
  std::function<void(StorageHealthEvent)> on_storage_health;
  // Test hook: runs on the writer's thread before each commit.
  std::function<void()> before_commit;
  // How many live queries there are (WatcherConfig::live_queries): a commit
  // sends its ChangeSet only when there is one. Null: always.
  std::shared_ptr<const std::atomic<size_t>> live_queries;
  // Where the writer counts what it does. Null: nowhere.
  std::shared_ptr<WriterStats> stats;
  // Where the writer publishes spool::Statistics' counters, commit
  // histograms and task counts after each commit. Null: nowhere.
  std::shared_ptr<metrics::Metrics> metrics;
  // Where progress reported for handed-off tasks goes
  // (ControlCommand::kReportProgress); the writer clears it once the
  // hand-off ends. Null: such reports are refused.
  std::shared_ptr<ProgressBoard> progress;
  // The random fraction for retry jitter (Options::random_fraction).
  // Null: a generator of the writer's own.
  std::function<double()> random_fraction;
  // Where each commit goes just before its write and sync, for standbys to
  // follow (spool/replication.h). Null: no standbys.
  std::shared_ptr<ReplicationLog> replication;
  // Durability::kReplicated: a commit's callers are answered once this
  // many standbys acknowledged it, or with TimedOut after ack_timeout; an
  // enqueue is refused with Busy while fewer are connected. 0: at once.
  uint32_t min_acks = 0;
  std::chrono::milliseconds ack_timeout{5000};
  // A clustered primary's leadership deadline: callers are acknowledged
  // only before it, and enqueues after it are refused. Null: none.
  std::shared_ptr<const LeaseFence> fence;
};

// Spawns the writer on a thread of its own (detached): a commit waits for
// fsync, which must not stall the actor scheduler's shared threads.
writer_actor SpawnWriter(caf::actor_system& system, WriterConfig config);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_WRITER_H_

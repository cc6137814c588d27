// The scheduler: owns the queue's order in memory and dispatches to workers.
//
// It keeps every queued task in a ReadyQueue (priority, fair rotation between
// groups, enqueue sequence; timed tasks by due time). Storage is read once,
// at open; afterwards the writer reports every change, so dispatch never
// touches RocksDB and never walks deleted index keys.
//
// Claims go to the writer, for the idle workers and for a pool of tasks
// claimed ahead of the busy ones (actors/claimed_pool.h), no more than the
// per-type, per-group and rate limits allow; committed claims go to idle
// workers or into the pool, from which a worker that finishes takes its
// next task without a message; outcomes come back and go to the writer in
// batches, together with the next claims, so that one commit settles
// finished tasks and claims the next ones.
// It also owns the attempt timers (timeouts), the cancellation tokens of
// running attempts, and the periodic tasks' slots.

#ifndef SPOOL_ACTORS_SCHEDULER_H_
#define SPOOL_ACTORS_SCHEDULER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <spool/clock.h>
#include <spool/handler.h>

#include "actors/actors.h"
#include "actors/attempt_control.h"
#include "actors/claimed_pool.h"
#include "actors/rate_buckets.h"
#include "storage/start_log.h"
#include "util/metrics.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

struct SchedulerConfig {
  writer_actor writer;
  std::shared_ptr<Clock> clock;
  // The queue and stored state as recovery found them.
  RecoveryResult recovered;
  // The default per-group limit; 0 for none.
  uint32_t group_concurrency = 0;
  // Per-group limits from the config ([groups.NAME]), by stored group,
  // over group_concurrency; a limit set by SetGroupConcurrency (or stored
  // by one) wins over them.
  std::unordered_map<std::string, uint32_t> group_limits;
  std::shared_ptr<ProgressBoard> progress;
  // Assigns ids to periodic slots' tasks; 0 when none can be had (the
  // slot is skipped, logged by the allocator).
  std::function<TaskId()> allocate_id;
  // How long to wait before claiming again after a failed write.
  std::chrono::milliseconds storage_retry_delay{100};
  // Tasks claimed ahead of the workers, shared with them.
  std::shared_ptr<ClaimedPool> pool;
  // The named rate limits, whose changed buckets the scheduler sends the
  // writer to store (null: none).
  std::shared_ptr<RateBuckets> rate_buckets;
  // The most tasks kept claimed ahead (runtime.claim_ahead).
  size_t claim_ahead = 256;
  // Where workers record starts (null: nowhere). Its slots bound the
  // attempts in flight; the scheduler hands them out and clears them.
  storage::StartLog* start_log = nullptr;
  // Where the scheduler publishes how many tasks are ready. Null: nowhere.
  std::shared_ptr<metrics::Metrics> metrics;
  // Told the gate a handler deferred on, after the scheduler closed it, on
  // the scheduler's thread (it must not block). Null: nobody.
  std::function<void(const std::string& gate)> on_deferred_gate;
};

// Spawns the scheduler on a thread of its own (detached), although it never
// blocks: its messages come from detached actors (the writer, the workers)
// and from threads outside the actor system, and on the actor system's
// shared threads each one waited for a sleeping CAF worker to wake
// (docs/experiments.md, experiment 7).
scheduler_actor SpawnScheduler(caf::actor_system& system,
                               SchedulerConfig config);

// The meta key of a type's rate-limit state.
std::string RateStateKey(std::string_view type);

// The controls that survive a restart, stored in meta by the scheduler as
// they change and restored by Open (RecoveryResult::controls): the pause of
// the whole runtime, of a type, closed gates and group limits. A key is
// kControlPrefix, a kind byte and the length-prefixed name; a value is one
// byte (1: paused or closed, 0: not) or a group limit as 4 big-endian
// bytes (0: the default limit).
inline constexpr std::string_view kControlPrefix = "control/";
enum class ControlKind : char {
  kPaused = 'p',
  kPausedType = 't',
  kClosedGate = 'g',
  kGroupLimit = 'l',
};
std::string ControlKey(ControlKind kind, std::string_view name);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_SCHEDULER_H_

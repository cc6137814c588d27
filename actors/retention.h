// Retention: the runtime's own Purge, on a timer.
//
// A pass starts every `interval` on the task clock (at once after one that
// took longer), walks each rule's finished tasks (succeeded, failed
// without using every attempt, failed after the last one, cancelled) and
// deletes those whose last change is older than the rule's age. Each step is
// one writer command examining at most `batch_size` index entries, the next
// sent only once the last one has committed and a pause nine times that
// step's time has passed, so claims, outcomes, enqueues and reads go on in
// between and keep the writer most of the time. A step keeps what Purge keeps:
// tasks a waiting task depends on, and tasks whose dedup key is still reserved
// (unique_for).

#ifndef SPOOL_ACTORS_RETENTION_H_
#define SPOOL_ACTORS_RETENTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <spool/clock.h>

#include "actors/actors.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

// The finished tasks one walk of a pass deletes.
struct RetentionRule {
  // For logs: "succeeded", "failed", "dead", "cancelled".
  const char* name = "";
  TaskStatus status = TaskStatus::kSucceeded;
  ControlCommand::FailedTasks failed = ControlCommand::FailedTasks::kAll;
  // Tasks whose last change is at least this old go. > 0.
  int64_t age_us = 0;
};

struct RetentionConfig {
  writer_actor writer;
  std::shared_ptr<Clock> clock;
  // Walked in this order in every pass. Not empty.
  std::vector<RetentionRule> rules;
  // From the start of one pass to the start of the next (at once after a
  // pass that took longer); the first starts at once. > 0.
  int64_t interval_us = 60'000'000;
  // Index entries one step examines. > 0.
  size_t batch_size = 1000;
  // Called on the retention actor's thread after each step committed, with
  // how many tasks it deleted (TestHooks::after_retention_step). May be
  // empty.
  std::function<void(uint64_t deleted)> after_step;
};

// Spawns the retention actor; its first pass starts at once.
retention_actor SpawnRetention(caf::actor_system& system,
                               RetentionConfig config);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_RETENTION_H_

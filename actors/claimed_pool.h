// ClaimedPool: tasks claimed ahead of the workers.
//
// A claim is durable before its task may start, and a commit takes about an
// fsync. So that a worker finishing one attempt does not wait for the
// writer to claim the next, the scheduler keeps a few tasks claimed ahead
// here: committed as running, not yet started. A worker that finishes an
// attempt takes the next task from the pool itself, with no message and no
// other thread woken; only an idle worker is sent its task by the
// scheduler. The pool is shared by all workers, so a task never waits
// behind a slow handler while another worker is free.
//
// How many are kept, and which tasks may be claimed ahead, is the
// scheduler's decision (scheduler.cc). A task that leaves the pool without
// being run (recalled at Close, Pause, a closed gate or a cancel) goes back
// to the writer as an unstarted outcome: its attempt is not counted.
//
// Thread safety: every method may be called from any thread.

#ifndef SPOOL_ACTORS_CLAIMED_POOL_H_
#define SPOOL_ACTORS_CLAIMED_POOL_H_

#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "actors/messages.h"

namespace spool::actors {

class ClaimedPool {
 public:
  // Adds a claimed task at the back.
  void Push(ClaimedTask task);
  // Takes the task at the front, if any.
  std::optional<ClaimedTask> Pop();
  // Takes the first task `match` selects, if any.
  std::optional<ClaimedTask> PopIf(
      const std::function<bool(const ClaimedTask&)>& match);
  // Takes out every task `match` selects, in pool order.
  std::vector<ClaimedTask> Recall(
      const std::function<bool(const ClaimedTask&)>& match);
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::deque<ClaimedTask> tasks_;
};

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_CLAIMED_POOL_H_

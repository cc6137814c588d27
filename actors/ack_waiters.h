// The callers of commits that wait for standbys (Durability::kReplicated):
// held by the writer in commit order until enough standbys acknowledged
// the commit's position, or failed with TimedOut at the deadline.
//
// Owned by the writer's thread; not thread-safe.

#ifndef SPOOL_ACTORS_ACK_WAITERS_H_
#define SPOOL_ACTORS_ACK_WAITERS_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include <spool/status.h>

#include "actors/lease_fence.h"

namespace spool::actors {

class AckWaiters {
 public:
  using Completion = std::function<void(const Status&)>;
  using TimePoint = std::chrono::steady_clock::time_point;

  // `fence`, when not null, must outlive this: acknowledgements after its
  // deadline fail with its status instead.
  AckWaiters(uint32_t min_acks, std::chrono::milliseconds timeout,
             const LeaseFence* fence = nullptr)
      : min_acks_(min_acks), timeout_(timeout), fence_(fence) {}
  // Fails whatever still waits with Closed: the runtime closes.
  ~AckWaiters();

  // Holds the completions of the commit at `position` until Acked reaches
  // it, or until now + the timeout; answers them at once if Acked already
  // did (commits reach standbys before their local sync ends).
  void Hold(uint64_t position, std::vector<Completion> done, TimePoint now);
  // Completions of commands that committed nothing: answered after every
  // held commit before them, at once if none is held.
  void After(std::vector<Completion> done);
  // Answers, in order, every held commit up to `position` with OK, and
  // remembers `position` for the commits held later.
  void Acked(uint64_t position);
  // The commits after `position` were retracted (ReplicationLog::Retract):
  // what was acknowledged of them no longer counts.
  void Rewind(uint64_t position) { acked_ = std::min(acked_, position); }
  // Fails every held commit whose deadline passed with TimedOut; returns
  // the next deadline, if any.
  std::optional<TimePoint> Expire(TimePoint now);
  bool empty() const { return held_.empty(); }

 private:
  struct Held {
    uint64_t position;
    TimePoint deadline;
    std::vector<Completion> done;
  };
  static void Run(std::vector<Completion>& done, const Status& status);
  Status Acknowledgement() const {
    return fence_ == nullptr ? Status::OK() : fence_->Check();
  }

  const uint32_t min_acks_;
  const std::chrono::milliseconds timeout_;
  const LeaseFence* const fence_;
  std::deque<Held> held_;
  uint64_t acked_ = 0;  // the highest position Acked was called with
};

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_ACK_WAITERS_H_

// A primary's leadership deadline (Runtime::FenceAcknowledgements): the
// writer acknowledges commits to their callers only before it, so that a
// primary that could not renew its lease (cluster.lease_ms) stops saying
// "stored" before another can be elected (docs/replication.md, "Fencing").
//
// Thread safety: Set from any thread; Check from any thread.

#ifndef SPOOL_ACTORS_LEASE_FENCE_H_
#define SPOOL_ACTORS_LEASE_FENCE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include <spool/status.h>

namespace spool::actors {

class LeaseFence {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Acknowledgements stop at `until`; a later Set moves it either way.
  void Set(TimePoint until) {
    until_ns_.store(until.time_since_epoch().count(),
                    std::memory_order_release);
  }

  // OK before the deadline, or when none was set; Busy after it.
  Status Check(TimePoint now = std::chrono::steady_clock::now()) const {
    int64_t until = until_ns_.load(std::memory_order_acquire);
    if (now.time_since_epoch().count() < until) return Status::OK();
    return Status::Busy(
        "this primary's leadership lease lapsed before the commit could be "
        "acknowledged: it is stored on this node's disk but may not survive "
        "the failover; retry on the new primary (an idempotency key makes "
        "that safe)");
  }

 private:
  static_assert(std::is_same_v<TimePoint::rep, int64_t> ||
                    sizeof(TimePoint::rep) == sizeof(int64_t),
                "steady_clock ticks must fit in 64 bits");
  std::atomic<int64_t> until_ns_{std::numeric_limits<int64_t>::max()};
};

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_LEASE_FENCE_H_

// Rate limits: "N attempts per period", per task type or shared by name.
//
// A per-type limit (HandlerOptions::rate_limit, [types.NAME.rate_limit])
// holds its type back in the scheduler: no task of the type is claimed
// until the limit allows the next attempt, so such a task stays pending,
// keeps its place and emits no event until it starts.
//
// A named limit (Runtime::AddRateLimit) spans one or more types, and a key
// function can split it into buckets, e.g. one per API host, each allowed
// `count` attempts per period of its own. Since the bucket depends on the
// payload, it is checked when a worker is about to run the attempt, after
// the claim: an attempt its buckets do not allow now reserves the earliest
// slot they all allow, and its task goes back to the queue due then,
// without spending the attempt (a TaskEvent::kDeferred with
// DeferReason::kRateLimited, next_attempt_at the slot). At that time it
// runs without being counted again. So a task waits at most once per
// limit, and a backlog runs in the order its tasks were first tried, while
// other buckets and other types keep running.
//
// Both kinds count every attempt, retries included, and use the generic
// cell rate algorithm: one attempt every period / count on average, with
// bursts of up to `count`. Both are stored with the queue's next commit,
// so that a restart does not reset them (a reservation is kept in memory
// only: after a restart a task that waited takes a new slot).

#ifndef SPOOL_INCLUDE_RATE_LIMIT_H_
#define SPOOL_INCLUDE_RATE_LIMIT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <spool/clock.h>

namespace spool {

class TaskContext;

// "N attempts per period". Every attempt counts, retries included.
struct RateLimit {
  // Attempts allowed per period; 0 for no limit. Default: 0.
  uint32_t count = 0;
  // Default: 1 second.
  Duration period = std::chrono::seconds(1);
};

// The bucket of a named rate limit an attempt falls in (see
// Runtime::AddRateLimit), from the attempt's context: its type, its
// payload (migrated to the handler's version), its group. Return the same
// key for attempts that share a budget, e.g. the host of the URL a payload
// names.
//
// Runs on the worker that is about to run the attempt, before its handler:
// keep it quick and free of I/O. A key longer than kMaxRateKeyBytes, or a
// function that throws, fails the attempt (it counts, and is retried by
// the task's policy) with an error naming the limit, and no handler runs.
using RateKeyOf = std::function<std::string(const TaskContext& attempt)>;

// The longest bucket key RateKeyOf may return.
inline constexpr size_t kMaxRateKeyBytes = 1024;

}  // namespace spool

#endif  // SPOOL_INCLUDE_RATE_LIMIT_H_

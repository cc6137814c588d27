// Statistics: what a runtime has done and holds, as a snapshot that costs
// its caller no wait (Runtime::GetStatistics), and its Prometheus text form.
//
// The actors keep the figures as they go, in relaxed atomic counters and
// fixed-bucket histograms; a snapshot reads them. Nothing is locked on the
// hot path and no message goes to an actor to take one.
//
// Exact and approximate:
// - Each counter, each histogram bucket and each gauge is exact as of the
//   moment it is read; a snapshot reads them one after another while the
//   runtime works, so two figures may be a commit apart (e.g. `claimed` may
//   count a claim whose `stored` is not yet counted: never in one commit,
//   since the writer adds a commit's counts after it). A histogram's
//   `count` is the sum of its buckets, so it always matches them; its `sum`
//   is read apart from them and may include an observation or two more.
// - Counters count since the runtime was opened, not over the queue's life:
//   a new process starts at zero. They only grow.
// - Histograms are as exact as their buckets: an observation is counted in
//   the first bucket whose upper bound is >= it.
//
//   spool::Statistics stats = runtime->GetStatistics();
//   std::string body = spool::FormatPrometheus(stats);  // for GET /metrics

#ifndef SPOOL_INCLUDE_STATISTICS_H_
#define SPOOL_INCLUDE_STATISTICS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <spool/task.h>

namespace spool {

// A histogram with fixed buckets, Prometheus style.
struct HistogramStatistics {
  // The buckets' upper bounds, ascending, in the histogram's base unit
  // (seconds, or tasks for batch sizes). A last bucket, above every bound
  // (+Inf), is implied.
  std::vector<double> upper_bounds;
  // Observations per bucket, not cumulative: counts[i] counts those in
  // (upper_bounds[i-1], upper_bounds[i]]; counts.back() those above every
  // bound. counts.size() == upper_bounds.size() + 1.
  std::vector<uint64_t> counts;
  // The sum of the observations, in the base unit.
  double sum = 0;
  // The number of observations: the sum of counts.
  uint64_t count = 0;
};

// What one task type holds and how long its handler takes.
struct TypeStatistics {
  std::string type;
  // Stored tasks of this type by status, indexed by TaskStatus, as of the
  // last commit.
  std::array<uint64_t, kTaskStatusCount> tasks{};
  // Seconds from the start of each attempt's handler to its return.
  HistogramStatistics handler_seconds;
};

// One named rate limit (Runtime::AddRateLimit, spool/rate_limit.h).
struct RateLimitStatistics {
  std::string name;
  // Attempts this limit made wait since open: each counts once when the
  // limit's bucket had no slot for it (DeferReason::kRateLimited), not
  // again when it starts at its reserved slot.
  uint64_t deferred = 0;
};

struct Statistics {
  // ---- Counters, since open ----

  // Tasks the writer received in Enqueue, EnqueueBatch and EnqueueChain
  // calls that passed the caller-side checks. Includes tasks then refused
  // (a dedup key held, a periodic slot already stored) or lost to a failed
  // commit.
  uint64_t enqueued = 0;
  // New task records committed: tasks that are durable.
  uint64_t stored = 0;
  // Attempts claimed: committed moves of a task to running. A task claimed
  // ahead and given back unstarted (Close, Pause, Cancel) counts here, and
  // its next claim counts again.
  uint64_t claimed = 0;
  // Tasks that succeeded (committed moves to succeeded).
  uint64_t succeeded = 0;
  // Attempts that failed: committed moves of a running task to
  // retry-scheduled or failed, the attempts a crash interrupted (found at
  // open) included, cancellations not. failed = retried + the dead that
  // were running.
  uint64_t failed = 0;
  // Failed attempts after which another attempt was scheduled (moves from
  // running to retry-scheduled). A manual Runtime::Retry is not counted.
  uint64_t retried = 0;
  // Tasks that ended failed (TaskStatus::kFailed): out of attempts, a
  // permanent error, or a dependency that failed. Each counts once, when it
  // enters that status.
  uint64_t dead = 0;
  // Tasks that ended cancelled (TaskStatus::kCancelled).
  uint64_t cancelled = 0;
  // Tasks that the last process left running, dealt with at open: their
  // attempt counted as interrupted, or given back unstarted.
  uint64_t recovered = 0;
  // Enqueue, EnqueueBatch and EnqueueChain calls refused with Busy because
  // the writer held Options::writer_max_pending_tasks tasks or
  // writer_max_pending_bytes bytes not yet durable (and, with
  // WriterFull::kWait, as many again waited for room). A batch counts once.
  uint64_t busy_refusals = 0;
  // Failed commits: the writer could not write or sync a batch, or reopen
  // the store before one (spool/storage_health.h). A batch retried after a
  // failure counts again each time it fails.
  uint64_t storage_failures = 0;
  // First successful commits after one or more failed ones.
  uint64_t storage_recoveries = 0;
  // Each named rate limit's deferrals, in the order the limits were added.
  std::vector<RateLimitStatistics> rate_limits;

  // ---- Histograms ----

  // Tasks changed per commit (a batch's size).
  HistogramStatistics commit_batch_tasks;
  // Seconds per commit: writing the batch to RocksDB, the write-ahead log's
  // sync included (TaskStore::Commit).
  HistogramStatistics commit_seconds;
  // Seconds per commit spent in writing and syncing the write-ahead log,
  // as RocksDB measures it (PerfContext::write_wal_time): in the default
  // sync mode, mostly the fsync. Part of commit_seconds. Empty unless
  // Options::measure_sync_time, which has a cost.
  HistogramStatistics sync_seconds;
  // Seconds from a task's enqueue (its created time, by Options::clock) to
  // the start of its first attempt's handler. Later attempts are not
  // counted: their wait is their backoff.
  HistogramStatistics start_latency_seconds;

  // ---- Gauges, now ----

  // Stored tasks by status, indexed by TaskStatus, as of the last commit.
  std::array<uint64_t, kTaskStatusCount> tasks{};
  // The same by type, and each type's handler times, in type order. A type
  // appears once it has stored tasks or a registered handler.
  std::vector<TypeStatistics> types;
  // Handlers running now.
  uint64_t running = 0;
  // Tasks ready to run that the scheduler holds: due, not yet claimed.
  uint64_t ready = 0;
  // Queries waiting for a reader.
  uint64_t reader_queue_depth = 0;
  // Live queries subscribed (Runtime::Watch*).
  uint64_t watchers = 0;
  // Tasks of Enqueue* calls handed to the writer whose tickets have not
  // resolved yet, and the bytes of their payloads and type names: what
  // writer_max_pending_tasks and writer_max_pending_bytes bound. Both read
  // 0 when both bounds are 0 (nothing is counted then).
  uint64_t pending_tasks = 0;
  uint64_t pending_bytes = 0;
  // Tasks of calls waiting for that room (WriterFull::kWait), not yet handed
  // to the writer, and their bytes.
  uint64_t waiting_tasks = 0;
  uint64_t waiting_bytes = 0;
  // Commits failed in a row now: 0 once a commit succeeds.
  uint64_t storage_consecutive_failures = 0;
};

// `stats` in the Prometheus text exposition format (version 0.0.4), every
// metric with HELP and TYPE lines and the prefix `spool_`, latencies in
// seconds, counters ending in `_total`, histograms as `_bucket{le=...}`,
// `_sum` and `_count`. Type names are label values, escaped as the format
// requires. Passes `promtool check metrics`. The metric names are listed in
// docs/statistics.md.
std::string FormatPrometheus(const Statistics& stats);

}  // namespace spool

#endif  // SPOOL_INCLUDE_STATISTICS_H_

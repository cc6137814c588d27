// Metrics: the live figures behind spool::Statistics (spool/statistics.h),
// kept by the actors as they work and read by Runtime::GetStatistics.
//
// Thread safety: every update is a relaxed atomic operation and takes no
// lock, except TypeSlot, which creates a type's slot under a mutex the first
// time; callers on the hot path (the writer, the workers) cache the slot's
// pointer, which stays valid as long as the Metrics. Snapshot may be called
// from any thread at any time; it locks only the slot list.

#ifndef SPOOL_UTIL_METRICS_H_
#define SPOOL_UTIL_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <spool/statistics.h>
#include <spool/task.h>

namespace spool::metrics {

// Fixed bucket bounds, in a histogram's raw unit, and the factor that turns
// the raw unit into the base unit.
struct Buckets {
  std::vector<uint64_t> bounds;
  double to_base_unit = 1;
};

// Nanoseconds, 1-2.5-5 per decade from 10 us to 50 s, then 100 s.
const Buckets& LatencyBuckets();
// Tasks, powers of two from 1 to 4096.
const Buckets& BatchBuckets();

class Histogram {
 public:
  static constexpr size_t kMaxBounds = 24;

  // REQUIRES: buckets.bounds.size() <= kMaxBounds; `buckets` outlives this.
  explicit Histogram(const Buckets& buckets);

  void Record(uint64_t raw);
  HistogramStatistics Snapshot() const;

 private:
  const Buckets& buckets_;
  std::array<std::atomic<uint64_t>, kMaxBounds + 1> counts_{};
  std::atomic<uint64_t> sum_{0};
};

// A task type's figures.
struct TypeSlot {
  explicit TypeSlot(std::string name) : type(std::move(name)) {}
  const std::string type;
  // Set by the writer after each commit that changed a task of the type.
  std::array<std::atomic<uint64_t>, kTaskStatusCount> tasks{};
  Histogram handler_run{LatencyBuckets()};
};

struct Metrics {
  std::atomic<uint64_t> enqueued{0};
  std::atomic<uint64_t> stored{0};
  std::atomic<uint64_t> claimed{0};
  std::atomic<uint64_t> succeeded{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> retried{0};
  std::atomic<uint64_t> dead{0};
  std::atomic<uint64_t> cancelled{0};
  std::atomic<uint64_t> recovered{0};
  // Storage health (spool/storage_health.h), kept by the writer.
  std::atomic<uint64_t> storage_failures{0};
  std::atomic<uint64_t> storage_recoveries{0};
  std::atomic<uint64_t> storage_consecutive_failures{0};

  Histogram commit_batch{BatchBuckets()};
  Histogram commit_latency{LatencyBuckets()};
  Histogram sync_latency{LatencyBuckets()};
  Histogram start_latency{LatencyBuckets()};

  std::array<std::atomic<uint64_t>, kTaskStatusCount> tasks{};
  std::atomic<int64_t> running{0};
  std::atomic<uint64_t> ready{0};
  std::atomic<uint64_t> reader_queue{0};
  // Read for the watcher gauge; null: none.
  std::shared_ptr<const std::atomic<size_t>> watchers;

  // The slot of `type`, created on first use (under a lock). Never null;
  // valid while this Metrics lives.
  TypeSlot* Slot(std::string_view type);

  // Every figure, now. Types in name order.
  Statistics Snapshot() const;

 private:
  mutable std::mutex slots_mutex_;
  std::map<std::string, std::unique_ptr<TypeSlot>, std::less<>> slots_;
};

// A per-thread cache of Metrics::Slot, for the hot path: the lock is taken
// once per type per cache.
class SlotCache {
 public:
  explicit SlotCache(Metrics* metrics) : metrics_(metrics) {}
  TypeSlot* Get(const std::string& type);

 private:
  Metrics* metrics_;
  std::unordered_map<std::string, TypeSlot*> slots_;
};

}  // namespace spool::metrics

#endif  // SPOOL_UTIL_METRICS_H_

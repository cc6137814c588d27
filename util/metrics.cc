#include "util/metrics.h"

#include <algorithm>

namespace spool::metrics {

const Buckets& LatencyBuckets() {
  static const Buckets buckets = [] {
    Buckets b;
    b.to_base_unit = 1e-9;
    for (uint64_t decade = 10'000; decade <= 10'000'000'000; decade *= 10) {
      b.bounds.push_back(decade);
      b.bounds.push_back(decade * 5 / 2);
      b.bounds.push_back(decade * 5);
    }
    b.bounds.push_back(100'000'000'000);
    return b;
  }();
  return buckets;
}

const Buckets& BatchBuckets() {
  static const Buckets buckets = [] {
    Buckets b;
    for (uint64_t n = 1; n <= 4096; n *= 2) b.bounds.push_back(n);
    return b;
  }();
  return buckets;
}

Histogram::Histogram(const Buckets& buckets) : buckets_(buckets) {}

void Histogram::Record(uint64_t raw) {
  const std::vector<uint64_t>& bounds = buckets_.bounds;
  size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), raw) - bounds.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(raw, std::memory_order_relaxed);
}

HistogramStatistics Histogram::Snapshot() const {
  HistogramStatistics h;
  size_t n = buckets_.bounds.size();
  h.upper_bounds.reserve(n);
  for (uint64_t bound : buckets_.bounds) {
    h.upper_bounds.push_back(static_cast<double>(bound) *
                             buckets_.to_base_unit);
  }
  h.counts.resize(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    h.counts[i] = counts_[i].load(std::memory_order_relaxed);
    h.count += h.counts[i];
  }
  h.sum = static_cast<double>(sum_.load(std::memory_order_relaxed)) *
          buckets_.to_base_unit;
  return h;
}

TypeSlot* Metrics::Slot(std::string_view type) {
  std::lock_guard<std::mutex> lock(slots_mutex_);
  auto it = slots_.find(type);
  if (it == slots_.end()) {
    it = slots_
             .emplace(std::string(type),
                      std::make_unique<TypeSlot>(std::string(type)))
             .first;
  }
  return it->second.get();
}

Statistics Metrics::Snapshot() const {
  auto load = [](const std::atomic<uint64_t>& x) {
    return x.load(std::memory_order_relaxed);
  };
  Statistics s;
  s.enqueued = load(enqueued);
  s.stored = load(stored);
  s.claimed = load(claimed);
  s.succeeded = load(succeeded);
  s.failed = load(failed);
  s.retried = load(retried);
  s.dead = load(dead);
  s.cancelled = load(cancelled);
  s.recovered = load(recovered);
  s.storage_failures = load(storage_failures);
  s.storage_recoveries = load(storage_recoveries);
  s.storage_consecutive_failures = load(storage_consecutive_failures);
  s.commit_batch_tasks = commit_batch.Snapshot();
  s.commit_seconds = commit_latency.Snapshot();
  s.sync_seconds = sync_latency.Snapshot();
  s.start_latency_seconds = start_latency.Snapshot();
  for (size_t i = 0; i < kTaskStatusCount; ++i) s.tasks[i] = load(tasks[i]);
  s.running = static_cast<uint64_t>(
      std::max<int64_t>(0, running.load(std::memory_order_relaxed)));
  s.ready = load(ready);
  s.reader_queue_depth = load(reader_queue);
  s.watchers = watchers ? watchers->load(std::memory_order_relaxed) : 0;
  std::lock_guard<std::mutex> lock(slots_mutex_);
  s.types.reserve(slots_.size());
  for (const auto& [name, slot] : slots_) {
    TypeStatistics t;
    t.type = name;
    for (size_t i = 0; i < kTaskStatusCount; ++i) {
      t.tasks[i] = load(slot->tasks[i]);
    }
    t.handler_seconds = slot->handler_run.Snapshot();
    s.types.push_back(std::move(t));
  }
  return s;
}

TypeSlot* SlotCache::Get(const std::string& type) {
  auto it = slots_.find(type);
  if (it != slots_.end()) return it->second;
  TypeSlot* slot = metrics_->Slot(type);
  slots_.emplace(type, slot);
  return slot;
}

}  // namespace spool::metrics

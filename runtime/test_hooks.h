// Hooks into a runtime for spool's own tests and tools. Not part of the API.

#ifndef SPOOL_RUNTIME_TEST_HOOKS_H_
#define SPOOL_RUNTIME_TEST_HOOKS_H_

#include <functional>
#include <memory>
#include <vector>

#include <spool/runtime.h>

namespace rocksdb {
class Env;
}

namespace spool {

struct TestHooks {
  // Runs on the writer's thread before each commit (e.g. to stall it).
  std::function<void()> before_commit;
  // Replaces the storage environment (e.g. with fault injection). Not owned.
  rocksdb::Env* env = nullptr;
  // false: the actors keep no statistics (GetStatistics reads zeros but
  // for `recovered`), so that spool-bench can measure what keeping them
  // costs.
  bool collect_statistics = true;
  // Called after each retention step (Options::retention_*) committed,
  // with how many tasks it deleted, on the retention actor's thread.
  std::function<void(uint64_t deleted)> after_retention_step;
};

// Runtime::Open with hooks.
Status OpenWithHooks(const Options& options, TestHooks hooks,
                     std::unique_ptr<Runtime>* runtime);

// What a runtime's writer has done so far (actors/writer_stats.h), for
// tools that measure it (spool-bench). Subtract two snapshots to get what
// happened between them.
struct WriterStatsSnapshot {
  uint64_t cpu_ns = 0;
  uint64_t commits = 0;
  uint64_t tasks_changed = 0;
  uint64_t enqueued = 0;
  uint64_t claims = 0;
  uint64_t outcomes = 0;
  uint64_t controls = 0;
  // Commits by size: bucket i holds commits of up to 2^i tasks changed
  // (and more than 2^(i-1)).
  std::vector<uint64_t> commit_sizes;
};
WriterStatsSnapshot GetWriterStats(Runtime& runtime);

}  // namespace spool

#endif  // SPOOL_RUNTIME_TEST_HOOKS_H_

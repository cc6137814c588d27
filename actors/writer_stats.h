// WriterStats: what the writer has done, counted as it goes: its own CPU
// time, the commands and tasks of each kind, and the size of its commits.
// Read by tools (spool-bench) while the writer runs.
//
// Thread safety: the writer adds; anyone may read. Each figure is exact on
// its own; a reader taking several may see one commit's figures partly.

#ifndef SPOOL_ACTORS_WRITER_STATS_H_
#define SPOOL_ACTORS_WRITER_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>

namespace spool::actors {

struct WriterStats {
  // Commit sizes, in tasks changed, by power of two: bucket i counts
  // commits of [2^(i-1) + 1, 2^i] tasks (bucket 0: one task or none).
  static constexpr size_t kBuckets = 21;

  // The writer thread's CPU time (CLOCK_THREAD_CPUTIME_ID), as of its last
  // commit.
  std::atomic<uint64_t> cpu_ns{0};
  std::atomic<uint64_t> commits{0};
  // Tasks whose state a commit changed, summed over commits.
  std::atomic<uint64_t> tasks_changed{0};
  // Items staged, by command: tasks enqueued, claims, outcomes, control
  // commands.
  std::atomic<uint64_t> enqueued{0};
  std::atomic<uint64_t> claims{0};
  std::atomic<uint64_t> outcomes{0};
  std::atomic<uint64_t> controls{0};
  std::array<std::atomic<uint64_t>, kBuckets> commit_sizes{};

  static size_t BucketOf(uint64_t tasks) {
    size_t bucket = 0;
    while (bucket + 1 < kBuckets && (uint64_t{1} << bucket) < tasks) ++bucket;
    return bucket;
  }
};

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_WRITER_STATS_H_

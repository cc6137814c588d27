// A primary's replication log: its recent commits in memory, the standbys
// that follow them, and the position that enough of them acknowledged
// (spool/replication.h, docs/replication.md).
//
// The writer appends each commit just before its local write and sync, so
// that the standbys' syncs run beside the primary's (docs/replication.md,
// "Shipping before the sync"); standbys ask for the commits after the
// position they applied (FollowLog), and each request acknowledges that
// position. A request finding nothing new waits, up to its
// own limit, for the next commit: one round trip carries both the
// acknowledgement of one group commit and the data of the next, as a group
// commit carries many callers.
//
// Thread safety: every method may be called from any thread. Callbacks run
// on the executor given at construction, never under the log's lock.

#ifndef SPOOL_ACTORS_REPLICATION_LOG_H_
#define SPOOL_ACTORS_REPLICATION_LOG_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spool/future.h>
#include <spool/replication.h>

#include "storage/keys.h"

namespace spool::actors {

struct ReplicationLogConfig {
  // The most bytes of commit data kept; the oldest commits go first, but
  // the newest is always kept.
  uint64_t max_bytes = uint64_t{64} << 20;
  // Durability::kReplicated: standbys that must acknowledge a commit; 0 for
  // none (standbys follow, callers do not wait for them).
  uint32_t min_acks = 0;
  // A standby not heard from for this long is not connected.
  std::chrono::milliseconds ack_timeout{5000};
  // Called with each new acknowledged position (the min_acks-th highest of
  // the connected standbys' applied positions) and the log it is of, in
  // increasing order within a log.
  std::function<void(uint64_t log_id, uint64_t position)> on_acked;
  // Runs the callbacks. Required.
  std::shared_ptr<Executor> executor;
};

class ReplicationLog {
 public:
  // A log `log_id` whose next commit is at position `last_position` + 1.
  ReplicationLog(ReplicationLogConfig config, uint64_t log_id,
                 uint64_t last_position);
  // Answers every waiting request with what it has.
  ~ReplicationLog();
  ReplicationLog(const ReplicationLog&) = delete;
  ReplicationLog& operator=(const ReplicationLog&) = delete;

  // The writer: the commit at `position`, just before its local write. A
  // position that does not follow the last one starts a new log
  // (StartOver).
  void Append(uint64_t position, std::string data);

  // The writer: a write went around the commits, or a commit's data was
  // lost; drops every kept commit and draws a new log id, so that every
  // standby copies a new base. The next commit is at `last_position` + 1.
  void StartOver(uint64_t last_position);

  // The writer: the commit appended last failed its local write, and may
  // be on standbys but not here. StartOver, and what the standbys
  // acknowledged beyond `last_position` counts for nothing: the next commit
  // reuses its position. (An on_acked of the old log already on its way is
  // the writer's to ignore: it passes the log id.)
  void Retract(uint64_t last_position);

  // A primary promoted from a standby: `commits`, the ones it applied
  // last, go before the log's first, so that a standby a few commits behind
  // follows on rather than copying a base. They must be contiguous and end
  // just before the log's oldest position (InvalidArgument otherwise,
  // nothing kept); the newest that fit max_bytes are kept.
  Status Seed(std::vector<ReplicatedCommit> commits);

  // The store's epochs (storage/keys.h, kClusterEpochsKey), oldest first:
  // at open, and after a new epoch's first commit. The last is this
  // primary's epoch.
  void SetEpochs(std::vector<storage::EpochStart> epochs);

  // A standby's request: records its acknowledgement, then answers with
  // the commits after `applied` (at once, or after up to request.wait for
  // the next), or `gone` when it cannot follow from there.
  void Follow(FollowRequest request, std::function<void(FollowChunk)> done);

  // How many standbys are connected (heard from within ack_timeout, or
  // waiting now).
  uint32_t Connected() const;

  // The log's id and the standbys' state, for /v1/cluster and metrics.
  void Describe(ReplicationStatus* status) const;

  uint64_t log_id() const;

 private:
  struct Entry {
    uint64_t position;
    std::string data;
  };
  struct Standby {
    uint64_t applied = 0;
    std::chrono::steady_clock::time_point last_seen;
    uint32_t waiting = 0;
  };
  struct Waiter {
    FollowRequest request;
    std::function<void(FollowChunk)> done;
    std::chrono::steady_clock::time_point deadline;
  };

  // Why `request`'s standby cannot follow this log from where it is, or
  // empty. REQUIRES: mutex_ held.
  std::string CannotFollow(const FollowRequest& request) const;
  // The commits of an epoch older than this primary's are ours only up to
  // the start of the next epoch: why the standby's are not, or empty.
  // REQUIRES: mutex_ held.
  std::string Diverged(const FollowRequest& request) const;
  uint64_t epoch() const { return epochs_.empty() ? 0 : epochs_.back().epoch; }
  // Fills `chunk` for `request`. REQUIRES: mutex_ held.
  FollowChunk Answer(const FollowRequest& request) const;
  // Whether `request` can be answered now. REQUIRES: mutex_ held.
  bool Ready(const FollowRequest& request) const;
  // Recomputes acked_; returns whether it grew. REQUIRES: mutex_ held.
  bool UpdateAcked(std::chrono::steady_clock::time_point now);
  bool IsConnected(const Standby& standby,
                   std::chrono::steady_clock::time_point now) const;
  // Takes the waiters that `ready` accepts. REQUIRES: mutex_ held.
  std::vector<Waiter> TakeWaiters(
      const std::function<bool(const Waiter&)>& ready);
  void Reply(
      std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>>
          replies);
  // StartOver or Retract. REQUIRES: mutex_ held; returns the waiters' replies.
  std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>> Restart(
      uint64_t last_position, bool retract);
  void NotifyAcked(uint64_t log_id, uint64_t position);
  void ExpireWaiters();

  const ReplicationLogConfig config_;
  mutable std::mutex mutex_;
  uint64_t log_id_;                          // GUARDED_BY(mutex_)
  uint64_t last_position_;                   // GUARDED_BY(mutex_)
  std::deque<Entry> entries_;                // GUARDED_BY(mutex_)
  uint64_t bytes_ = 0;                       // GUARDED_BY(mutex_)
  std::map<std::string, Standby> standbys_;  // GUARDED_BY(mutex_)
  std::vector<Waiter> waiters_;              // GUARDED_BY(mutex_)
  uint64_t acked_ = 0;                       // GUARDED_BY(mutex_)
  std::vector<storage::EpochStart> epochs_;  // GUARDED_BY(mutex_)
  bool closing_ = false;                     // GUARDED_BY(mutex_)
  std::condition_variable wake_;
  // Answers waiters whose wait ran out; a thread of its own, since a
  // request may wait for up to a minute.
  std::thread expirer_;
};

// A random, nonzero log id.
uint64_t NewLogId();

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_REPLICATION_LOG_H_

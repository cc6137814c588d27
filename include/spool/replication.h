// Replication: a primary's commits copied, in order, to standbys.
//
// Each group commit of a primary is one *replicated commit*: the bytes of
// its storage write batch and its *position*, the number of batches the
// store has committed (1, 2, ...). The position is part of the replicated
// state itself (the batch writes it), so a standby that applied commit N
// holds exactly what the primary held after commit N.
//
// A primary keeps its recent commits in memory, in a log of a bounded size
// (Options::replication_log_bytes), under a *log id* drawn at each open. A
// standby follows one log id: asked for commits after a position that the
// log no longer holds, or under another log id (the primary restarted, or
// wrote outside its commits, as an index repair does), the primary answers
// kGone, and the standby copies a fresh base backup (spool/backup.h) and
// follows again from there.
//
// Durability::kReplicated makes a commit's callers wait until
// Options::replication_min_acks standbys have reported a position at or
// beyond it, after the primary's own sync. docs/replication.md says what
// that promises and what it does not.
//
// The transport is not here: spoold carries these over HTTP(S)
// (docs/replication.md); an embedder may carry them over anything.

#ifndef SPOOL_INCLUDE_REPLICATION_H_
#define SPOOL_INCLUDE_REPLICATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include <spool/clock.h>
#include <spool/status.h>

namespace spool {

// One group commit, as a standby applies it.
struct ReplicatedCommit {
  // The store's committed batches after this commit: 1, 2, ...
  uint64_t position = 0;
  // The storage engine's write batch, as committed: opaque bytes.
  std::string data;
};

// What a standby asks of a primary's log (Runtime::FollowLog).
struct FollowRequest {
  // The standby's name, as /v1/cluster shows it: 1 to 64 of [A-Za-z0-9._-].
  std::string standby;
  // The log the standby follows; 0 when it follows none yet (then the
  // answer is `gone`).
  uint64_t log_id = 0;
  // The last position the standby applied and synced: an acknowledgement
  // of every commit up to it, and where the answer starts.
  uint64_t applied = 0;
  // The epoch of the standby's last applied commit (ReplicationStatus::
  // epoch): a primary of a later epoch answers `gone` when the standby
  // holds commits past the start of an epoch it did not follow (they were
  // never acknowledged, and a new leader wrote others in their place).
  // 0 outside a cluster.
  uint64_t epoch = 0;
  // The most bytes of commit data in the answer; at least one commit is
  // answered, whatever its size. In [1 KiB, 256 MiB].
  uint64_t max_bytes = 16 << 20;
  // How long to wait for a commit when none follows `applied` yet; zero
  // answers at once. At most 60 s.
  Duration wait{0};
};

// The answer to a FollowRequest.
struct FollowChunk {
  // The standby cannot follow from where it is: its log id is not the
  // primary's, or the log no longer holds the commit after `applied`.
  // `why` says which; the standby must copy a new base backup.
  bool gone = false;
  std::string why;
  // The standby is of a later epoch than this primary: the primary was
  // deposed, and the standby must follow the new leader. `why` says so.
  bool stale_primary = false;
  // The log the commits belong to.
  uint64_t log_id = 0;
  // The primary's epoch (0 outside a cluster). A standby refuses commits of
  // an epoch older than its own.
  uint64_t epoch = 0;
  // The primary's last committed position.
  uint64_t primary_position = 0;
  // The commits after FollowRequest::applied, in order; empty when none
  // came within the wait.
  std::vector<ReplicatedCommit> commits;
};

// What a primary knows of one standby.
struct StandbyInfo {
  std::string name;
  // The last position it reported as applied.
  uint64_t applied = 0;
  // The bytes of commit data between that position and the primary's last.
  uint64_t lag_bytes = 0;
  // Whether it asked within Options::replication_ack_timeout.
  bool connected = false;
};

// The replication state of a runtime (Runtime::GetReplicationStatus).
struct ReplicationStatus {
  // "primary", or "standby" for a runtime opened with Runtime::OpenStandby.
  std::string role = "primary";
  // The store's committed batches: the last position committed (a primary)
  // or applied (a standby).
  uint64_t position = 0;
  // A primary's log id and the first position its log still holds; a
  // standby's followed log id (0: none yet).
  uint64_t log_id = 0;
  uint64_t oldest_kept = 0;
  uint64_t log_bytes = 0;
  // The epoch of the last commit (0 outside a cluster): a primary's own
  // since it was elected, or the one a standby applied last.
  uint64_t epoch = 0;
  // Durability::kReplicated: how many standbys must acknowledge a commit.
  uint32_t min_acks = 0;
  // A primary's standbys, by name; empty on a standby.
  std::vector<StandbyInfo> standbys;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_REPLICATION_H_

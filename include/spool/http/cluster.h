// A spoold in a cluster (docs/replication.md, "Failover"): which node is
// the primary is etcd's to say, not spool's. Each node holds an etcd lease
// and a member key under it; the primary holds the leader key too, and
// the key's create revision is its *epoch*. ClusterNode runs that protocol
// on a thread of its own and tells spoold the role to take; spoold opens
// its runtime in that role and says when it has (Applied).
//
//   ClusterNode::Start(options, min_acks, status_fn, &node);
//   ClusterRole role;                               // a candidate
//   while (running) {
//     ClusterRole next = node->WaitForRole(role, 100ms);
//     if (next != role) { ...reopen the runtime as `next`...;
//                         node->Applied(next); role = next; }
//     if (primary) runtime->FenceAcknowledgements(node->lease_deadline());
//   }
//
// Promotion is safe by quorum intersection (Raft's argument): with N
// standbys and commits acknowledged by K of them (replication.min_acks), a
// node takes the leader key only after N - K + 1 nodes (itself included)
// have stopped following and published their positions, and only when its
// own (epoch, position) is the highest of them: one of those nodes holds
// every acknowledged commit, and the winner holds at least as much.
//
// Thread safety: every method may be called from any thread.

#ifndef SPOOL_INCLUDE_HTTP_CLUSTER_H_
#define SPOOL_INCLUDE_HTTP_CLUSTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <spool/replication.h>
#include <spool/status.h>

namespace spool::http {

struct ClusterOptions {
  // etcd's client URLs, "http(s)://HOST:PORT"; empty: no cluster.
  std::vector<std::string> etcd;
  // With https etcd URLs: the CA of etcd's certificate; empty: the
  // system's.
  std::string etcd_ca_file;
  // This node's name, one of `nodes`; also its name as a standby.
  std::string name;
  // Every node's name, this one's included: 2 to 16. Their count fixes the
  // promotion quorum, so it is configured, never learned.
  std::vector<std::string> nodes;
  // Where the other nodes and clients reach this spoold:
  // "http(s)://HOST:PORT".
  std::string advertise;
  // The TTL of the node's etcd lease, in whole seconds: [1000, 60000] ms. A
  // dead primary is replaced after about this long.
  std::chrono::milliseconds lease{2000};
  // The cluster's keys in etcd: PREFIX/leader and PREFIX/members/NAME.
  std::string prefix = "/spool/default";

  bool enabled() const { return !etcd.empty(); }
  // InvalidArgument naming the key (cluster.KEY) for a bad value.
  Status Validate() const;
};

// The role ClusterNode asks spoold to take.
struct ClusterRole {
  enum class Kind {
    // No leader is known: the runtime is a standby that follows no one, so
    // that its position holds still while an election reads it.
    kCandidate,
    kPrimary,
    kStandby,
  };
  Kind kind = Kind::kCandidate;
  // The leader's epoch: a primary's own, a standby's primary's.
  uint64_t epoch = 0;
  // A standby's primary: its name and advertised URL.
  std::string primary_name;
  std::string primary_url;

  bool operator==(const ClusterRole& other) const {
    return kind == other.kind && epoch == other.epoch &&
           primary_url == other.primary_url;
  }
  bool operator!=(const ClusterRole& other) const { return !(*this == other); }
};

const char* RoleName(ClusterRole::Kind kind);

class ClusterNode {
 public:
  // Validates `options` and starts the node's thread. `min_acks` is the
  // primary's replication.min_acks (at least 1, at most nodes - 1).
  // `status` reads this node's runtime (Runtime::GetReplicationStatus); it
  // is called on the node's thread, only while the role last Applied holds.
  static Status Start(ClusterOptions options, uint32_t min_acks,
                      std::function<ReplicationStatus()> status,
                      std::unique_ptr<ClusterNode>* node);

  // Resigns the leader key if held, revokes the lease (so that a
  // successor need not wait for it to lapse) and joins the thread: bounded
  // by a few etcd request timeouts.
  virtual ~ClusterNode() = default;

  // The role to take: at once when it differs from `current`, else after
  // up to `timeout` (then `current`, or a new one).
  virtual ClusterRole WaitForRole(const ClusterRole& current,
                                  std::chrono::milliseconds timeout) = 0;

  // spoold took `role` (a candidate has stopped following; a primary has
  // begun its epoch).
  virtual void Applied(const ClusterRole& role) = 0;

  // Until when the lease surely holds, measured from the send of its last
  // renewal: Runtime::FenceAcknowledgements' argument. In the past when
  // no lease is held.
  virtual std::chrono::steady_clock::time_point lease_deadline() const = 0;

  // The last etcd error, or empty.
  virtual std::string last_error() const = 0;

 protected:
  ClusterNode() = default;
};

}  // namespace spool::http

#endif  // SPOOL_INCLUDE_HTTP_CLUSTER_H_

// Peers: the queue systems spool-bench compares spool with.
//
// A Peer owns one instance of a queue system for the length of a benchmark:
// its files, and its server process if it has one. A PeerClient is one
// caller's connection to it. Every peer runs with equal durability: a write
// is acknowledged only after the peer has made it durable (fsync/fdatasync).
//
// Two peers are limits rather than queues: "fsync" (the disk) and
// "rocksdb_raw" (the storage engine spool builds on). They store tasks but
// cannot claim them.
//
// Thread safety: Setup, Teardown and destruction of a Peer must not run
// concurrently with any other call on it. Between Setup and Teardown,
// Connect, name and Describe may be called from any number of threads at
// once. A PeerClient is used by one thread at a time; distinct clients may be
// used concurrently.

#ifndef SPOOL_BENCHMARKS_PEERS_PEER_H_
#define SPOOL_BENCHMARKS_PEERS_PEER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <spool/status.h>

namespace spool::bench {

// One caller's connection to a peer, made by Peer::Connect.
//
// Lifetime: destroy every client of a peer before that peer's Teardown. A
// client that outlives it does not crash, but its calls fail.
class PeerClient {
 public:
  virtual ~PeerClient() = default;

  // Durably stores one task (priority 0) and returns once the peer has said
  // it is durable. `type` and `payload` are copied; they need only live for
  // the call.
  virtual Status Enqueue(std::string_view type, std::string_view payload) = 0;

  // Stores `n` tasks quickly, for benchmark set-up. May batch writes and may
  // relax durability; the tasks are claimable when it returns.
  virtual Status Preload(size_t n, std::string_view type,
                         std::string_view payload) = 0;

  // Claims the next ready task (highest priority, oldest first) and marks it
  // completed: the durable claim and the durable completion a real queue
  // needs. Returns NotFound when no task is ready, NotSupported for the limit
  // peers ("fsync", "rocksdb_raw").
  virtual Status ClaimAndComplete() = 0;
};

// A queue system that spool-bench compares spool with.
class Peer {
 public:
  // Stops the peer's server, if it still runs, like Teardown.
  virtual ~Peer() = default;

  // "fsync", "rocksdb_raw", "sqlite", "redis", "redis_plain", "beanstalkd"
  // or "postgres".
  virtual std::string name() const = 0;

  // Starts the peer (its server, if any, on 127.0.0.1 in `workdir`) and
  // creates the queue schema. `workdir` is an existing, empty directory that
  // the caller owns and removes after Teardown; the peer keeps all its files
  // there.
  //
  // Returns NotSupported("<why>") when the peer cannot run here (its server
  // binary is missing, or this build lacks its client library), so that the
  // caller can skip it with a note. Any other error means the peer should
  // run but failed; the message names the step, and for a server includes
  // the tail of its log. After an error, Teardown is still safe to call.
  //
  // A server is started as a child process that gets SIGKILL when the thread
  // calling Setup exits (PR_SET_PDEATHSIG), so a crash of the benchmark
  // leaves no server behind. Call Setup from a thread that outlives the peer,
  // e.g. the main thread.
  //
  // REQUIRES: Setup has not succeeded before, or Teardown was called since.
  virtual Status Setup(const std::string& workdir) = 0;

  // Stops the server and releases every resource Setup acquired; leaves the
  // files in `workdir`. Bounded: a server that ignores its stop signal for
  // 10 s is killed. Safe to call twice, before Setup and after a failed one.
  virtual void Teardown() = 0;

  // Opens one connection for one caller thread; many may exist at once.
  // Returns FailedPrecondition before Setup.
  virtual Result<std::unique_ptr<PeerClient>> Connect() = 0;

  // One line: the version and the durability settings in force. After Setup
  // the settings are those the running peer reports.
  virtual std::string Describe() const = 0;
};

// Every peer, in the order listed at Peer::name. Peers whose client library
// this build lacks are included; their Setup returns NotSupported.
std::vector<std::unique_ptr<Peer>> MakeAllPeers();

// The peer called `name`, or null if there is none.
std::unique_ptr<Peer> MakePeer(std::string_view name);

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_PEERS_PEER_H_

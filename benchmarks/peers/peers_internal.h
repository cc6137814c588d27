// Constructors of the individual peers, for the factory in peer.cc and for
// tests that need a peer with non-default options. Not for spool-bench, which
// uses MakeAllPeers/MakePeer.

#ifndef SPOOL_BENCHMARKS_PEERS_PEERS_INTERNAL_H_
#define SPOOL_BENCHMARKS_PEERS_PEERS_INTERNAL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "benchmarks/peers/peer.h"

namespace spool::bench {

// Where Debian 12 installs the servers.
inline constexpr char kRedisServerPath[] = "/usr/bin/redis-server";
inline constexpr char kBeanstalkdPath[] = "/usr/bin/beanstalkd";
inline constexpr char kPostgresBinDir[] = "/usr/lib/postgresql/15/bin";

// The Redis peers' lists, named here for tests that look at them: "redis"
// keeps task ids in its lists, "redis_plain" the tasks themselves.
inline constexpr char kRedisPendingKey[] = "spool:pending";
inline constexpr char kRedisProcessingKey[] = "spool:processing";
inline constexpr char kRedisPlainPendingKey[] = "spool:plain:pending";
inline constexpr char kRedisPlainProcessingKey[] = "spool:plain:processing";

// How a peer with a server process starts it.
struct ServerPeerOptions {
  // The TCP port on 127.0.0.1. 0 picks a free port, and picks another if the
  // first is taken before the server binds it. A fixed port that is taken
  // makes Setup fail with Busy.
  uint16_t port = 0;
  // The server binary; for postgres, the directory holding `postgres` and
  // `initdb`. Empty: the Debian path above.
  std::string binary;
  // How long Setup waits for the server to answer before giving up.
  std::chrono::milliseconds start_timeout = std::chrono::seconds(30);
};

std::unique_ptr<Peer> MakeFsyncPeer();
std::unique_ptr<Peer> MakeRocksDbRawPeer();
std::unique_ptr<Peer> MakeSqlitePeer();
// Redis with one Lua script per step and a hash per task.
std::unique_ptr<Peer> MakeRedisPeer(const ServerPeerOptions& options = {});
// Redis with one plain list command per step (LPUSH, LMOVE, LREM).
std::unique_ptr<Peer> MakeRedisPlainPeer(const ServerPeerOptions& options = {});
std::unique_ptr<Peer> MakeBeanstalkdPeer(const ServerPeerOptions& options = {});
std::unique_ptr<Peer> MakePostgresPeer(const ServerPeerOptions& options = {});

// A peer that cannot run in this build: Setup returns NotSupported(`reason`)
// and Describe says why. Used when a client library was not found.
std::unique_ptr<Peer> MakeUnavailablePeer(std::string name, std::string reason);

}  // namespace spool::bench

#endif  // SPOOL_BENCHMARKS_PEERS_PEERS_INTERNAL_H_

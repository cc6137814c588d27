// The gateway: hands leased tasks to remote workers (spool-worker
// processes, spool::RemoteWorker) over CAF's network layer.
//
// A remote worker connects, says hello with the shared secret, its node
// name, the task types it serves and its concurrency. Once the secret
// matches (compared in constant time, before anything else happens), the
// gateway attaches concurrency + claim_ahead worker slots to the scheduler:
// to the scheduler they are workers like the local ones, whose `run`
// messages a small forwarding actor passes here. The gateway reads the
// task's spec, records the start in the start log (a leased attempt counts
// as started: the gateway cannot know better after a crash), and sends the
// worker a RemoteLease tagged with a lease id.
//
// Heartbeats extend a session's lease in memory. When the connection goes
// down (CAF's down message) or no heartbeat arrives within lease_ms, every
// lease of the session is settled as interrupted, the path recovery takes
// for an attempt a crash cut short, and the session's slots are detached.
// An outcome naming a lease the gateway no longer holds (given away, or of
// a session it dropped) is refused and logged: it never reaches the writer,
// so it cannot overwrite the task's newer attempt.
//
// Detached: reading a spec may wait for the disk.

#ifndef SPOOL_ACTORS_GATEWAY_H_
#define SPOOL_ACTORS_GATEWAY_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <spool/clock.h>

#include "actors/actors.h"
#include "actors/rate_buckets.h"
#include "storage/start_log.h"
#include "storage/task_store.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

struct GatewayConfig {
  scheduler_actor scheduler;
  // Records each lease's node and deadline in the task's state.
  writer_actor writer;
  const storage::TaskStore* store = nullptr;
  // Where leased starts are recorded (null: nowhere).
  storage::StartLog* start_log = nullptr;
  std::shared_ptr<Clock> clock;
  // What a remote worker must present in its hello.
  std::string secret;
  std::chrono::milliseconds lease{10000};
  std::chrono::milliseconds heartbeat{1000};
  // Slots attached per worker beyond its declared concurrency.
  uint32_t claim_ahead = 16;
  // The named rate limits, asked before each lease of a type they cover
  // (null: there are none).
  std::shared_ptr<RateBuckets> rate_buckets;
};

// Spawns the gateway; the caller publishes it (caf::io::publish).
gateway_actor SpawnGateway(caf::actor_system& system, GatewayConfig config);

// Whether `a` equals `b`, in time that depends only on their lengths.
bool SecretsMatch(const std::string& a, const std::string& b);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_GATEWAY_H_

// The gateway: hands leased tasks to remote workers (spool-worker
// processes, spool::RemoteWorker) over CAF's network layer.
//
// A remote worker connects to the gateway's door (gateway_door.h), proves
// it holds the shared secret (remote_protocol.h), and says hello with its
// node name, the task types it serves and its concurrency. The gateway
// then attaches concurrency + claim_ahead worker slots to the scheduler:
// to the scheduler they are workers like the local ones, whose `run`
// messages a small forwarding actor passes here. The gateway reads the
// task's spec, records the start in the start log (a leased attempt counts
// as started: the gateway cannot know better after a crash), and sends the
// worker a RemoteLease tagged with a lease id. Every message of a session,
// both ways, carries the session's random key.
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
  // The largest result a remote attempt may report (storage.
  // max_result_bytes); a larger one fails the attempt.
  size_t max_result_bytes = size_t{64} << 10;
  std::chrono::milliseconds lease{10000};
  std::chrono::milliseconds heartbeat{1000};
  // Slots attached per worker beyond its declared concurrency.
  uint32_t claim_ahead = 16;
  // The named rate limits, asked before each lease of a type they cover
  // (null: there are none).
  std::shared_ptr<RateBuckets> rate_buckets;
};

// Spawns the gateway. Never publish it: the network reaches it only
// through its door (actors/gateway_door.h), which checks each hello.
gateway_actor SpawnGateway(caf::actor_system& system, GatewayConfig config);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_GATEWAY_H_

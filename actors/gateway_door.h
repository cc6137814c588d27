// The gateway's door: the one actor the runtime publishes for remote
// workers (caf::io::publish), in front of the gateway, which is never
// named to the network.
//
// It takes from the network only the handshake (challenge, hello; see
// actors/remote_protocol.h) and a session's heartbeat and outcomes, every
// other message being dropped before CAF acts on it (network_facing.h):
// an exit, a link, a down or error message, the gateway's internal
// messages, a forwarding stack. It checks each hello's proof against the
// shared secret, with a single-use nonce of its own, before the gateway
// sees the hello; the gateway checks each session message's key.
//
// Failed hellos are logged, at most kFailedHelloLogBurst lines per
// kFailedHelloLogPeriod, with a count of those left out.
//
// Runs on CAF's shared threads: it computes HMACs and forwards, nothing
// that blocks.

#ifndef SPOOL_ACTORS_GATEWAY_DOOR_H_
#define SPOOL_ACTORS_GATEWAY_DOOR_H_

#include <chrono>
#include <string>

#include <caf/fwd.hpp>

#include "actors/actors.h"

namespace spool::actors {

// Ends the door (local only: its type is never announced to the network).
struct DoorStop {};

inline constexpr size_t kMaxPendingChallenges = 4096;
inline constexpr std::chrono::seconds kChallengeLifetime{10};
inline constexpr int kFailedHelloLogBurst = 10;
inline constexpr std::chrono::seconds kFailedHelloLogPeriod{10};

// Spawns the door of `gateway`, checking hellos against `secret`.
caf::actor SpawnGatewayDoor(caf::actor_system& system, gateway_actor gateway,
                            std::string secret);

}  // namespace spool::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::actors::DoorStop)

#endif  // SPOOL_ACTORS_GATEWAY_DOOR_H_

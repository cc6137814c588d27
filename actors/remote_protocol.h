// The remote workers' handshake and session keys: what both ends of a
// gateway connection compute, so that the shared secret never travels and
// a recorded hello cannot be replayed (docs/security.md, "Remote workers").
//
//   worker                                door (gateway)
//   (challenge, worker_nonce)  -------->
//                              <--------  (door_nonce, DoorProof)
//   checks DoorProof: this gateway holds the secret
//   (hello, RemoteHello{nonces, WorkerProof, node, types, concurrency})
//                              -------->  checks the proof; the door nonce
//                                         is single use and expires
//                              <--------  RemoteWelcome{session, key}
//
// Every later message of the session, both ways, carries the session's
// random key; a message without it is dropped. Without TLS the key (not
// the secret) is visible to whoever can read the traffic: beyond loopback
// the gateway needs [remote.tls] or remote.allow_insecure.

#ifndef SPOOL_ACTORS_REMOTE_PROTOCOL_H_
#define SPOOL_ACTORS_REMOTE_PROTOCOL_H_

#include <cstddef>
#include <string>
#include <string_view>

#include <spool/status.h>

namespace spool::actors {

struct RemoteHello;

// Size limits on what a peer sends before it is authenticated.
inline constexpr size_t kNonceHexBytes = 64;  // 32 random bytes, hex
inline constexpr size_t kProofHexBytes = 64;  // HMAC-SHA256, hex
inline constexpr size_t kMaxNodeNameBytes = 256;
inline constexpr size_t kMaxHelloTypes = 1024;
inline constexpr size_t kMaxHelloTypeBytes = 256;

// 32 random bytes from OpenSSL's CSPRNG, as 64 lowercase hex digits; empty
// if the generator failed.
std::string NewNonce();

// The door's proof for a challenge: HMAC-SHA256(secret, "spool-door" |
// worker_nonce | door_nonce), hex.
std::string DoorProof(const std::string& secret, std::string_view worker_nonce,
                      std::string_view door_nonce);

// The worker's proof in its hello: HMAC-SHA256(secret, "spool-worker" |
// both nonces | node | types | concurrency), hex. Each field is length-
// prefixed, so no two different hellos share one.
std::string WorkerProof(const std::string& secret, const RemoteHello& hello);

// Whether `a` equals `b`, in time that depends only on their lengths;
// false when `b` is empty.
bool SecretsMatch(std::string_view a, std::string_view b);

// OK if the hello's fields keep to the limits above (checked before its
// proof is computed), else why not.
Status CheckHelloShape(const RemoteHello& hello);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_REMOTE_PROTOCOL_H_

// RemoteWorker: runs handlers on another machine than the queue's, for a
// runtime whose [remote] listen is set (docs/scale-out.md).
//
// The worker connects to the runtime's gateway over TCP (CAF's network
// layer), presents the shared secret, declares the task types it has
// handlers for and its concurrency, and then runs the tasks leased to it
// with the same TaskContext local handlers get (cancellation, progress is
// kept on the worker, retry delay, snooze, deferral, result). While it runs
// it sends heartbeats; a worker whose heartbeats stop (a stall, a cut
// network) loses its leases after remote.lease_ms, and the runtime runs
// those tasks again elsewhere with the attempt counted. When the
// connection drops, every attempt it runs is cancelled (TaskContext::
// cancelled) and the worker reconnects with backoff.
//
// Not here, unlike local handlers: payload versions and migrations (the
// payload is passed as stored) and TaskContext::dependencies (empty).

#ifndef SPOOL_INCLUDE_REMOTE_WORKER_H_
#define SPOOL_INCLUDE_REMOTE_WORKER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <spool/handler.h>
#include <spool/status.h>

namespace spool {

struct RemoteWorkerOptions {
  // The gateway's "HOST:PORT" (the runtime's remote.listen). Required.
  // For a cluster (docs/replication.md, "Failover"), every node's, joined
  // with commas: only the primary's gateway listens, and after a lost
  // connection or a failed try the worker tries the next one in turn. The
  // attempts it held on a primary that died are recovered by the new one,
  // the attempt counted, as after a worker crash.
  std::string connect;
  // The shared secret, or the file holding it (remote.secret_file's; it
  // must not be readable by group or others). One is required; `secret`
  // wins. Default: "".
  std::string secret;
  std::string secret_file;
  // How this worker names itself in the runtime's logs. Default: "" (the
  // host name and process id).
  std::string node;
  // Attempts run at once, each on a thread of its own. Default: 1.
  uint32_t concurrency = 1;
  // How long Connect waits for the first answer. Default: 5 s.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
  // Reconnection backoff: doubles from the first to the most. Defaults:
  // 100 ms, 5 s.
  std::chrono::milliseconds reconnect_initial{100};
  std::chrono::milliseconds reconnect_max = std::chrono::seconds(5);
  // The largest result a handler may set. Default: 1 MiB.
  size_t max_result_bytes = size_t{1} << 20;
  // TLS, for a gateway with remote.tls_* set: this worker's certificate
  // and private key (PEM; the key file must not be readable by group or
  // others), and the CA that signed the gateway's certificate. All three or
  // none; a gateway with TLS refuses a worker without them, and a worker
  // with them refuses a gateway whose certificate that CA did not sign.
  // Default: "" (plain BASP).
  std::string tls_certificate_file;
  std::string tls_key_file;
  std::string tls_ca_file;
};

// Thread safe. Destroying it closes it.
class RemoteWorker {
 public:
  // Validates `options` (InvalidArgument naming the field) and reads the
  // secret; nothing connects yet.
  static Status Create(RemoteWorkerOptions options,
                       std::unique_ptr<RemoteWorker>* worker);

  virtual ~RemoteWorker() = default;

  // Registers the handler of `type`; only before Connect. `options` may
  // carry retry_if and retry_delay (the others are the runtime's).
  virtual Status RegisterHandler(const std::string& type, Handler handler,
                                 HandlerOptions options = {}) = 0;

  // Connects and says hello; returns once the gateway accepted it, or with
  // the error (InvalidArgument when the gateway refused it, e.g. a wrong
  // secret; Unavailable-like IOError when it could not be reached within
  // connect_timeout). Afterwards the worker reconnects by itself.
  virtual Status Connect() = 0;

  // Stops taking leases, asks running handlers to stop
  // (TaskContext::stopping) and waits up to `timeout` for them, then
  // disconnects. Returns OK when every handler returned in time; else
  // TimedOut naming how many still run: the worker has disconnected, the
  // runtime settles their attempts as interrupted (and runs the tasks
  // again), their outcomes are dropped, and the destructor waits for their
  // threads. Idempotent: a second call returns OK at once.
  virtual Status Close(
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) = 0;

  // Attempts finished and reported since Connect (for tools and tests).
  virtual uint64_t finished() const = 0;
  // Times the worker had to connect again after losing its session.
  virtual uint64_t reconnects() const = 0;
};

}  // namespace spool

#endif  // SPOOL_INCLUDE_REMOTE_WORKER_H_

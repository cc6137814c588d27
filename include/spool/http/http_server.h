// HttpServer: spool's REST API, event streams and metrics over HTTP/1.1,
// on Boost.Beast and Asio (docs/server.md has the API).
//
// Everything is asynchronous on a few io threads (ServerOptions::threads):
// no thread is parked per connection, per waiting request or per event
// stream. A request that needs spool (an enqueue, a query) is answered from
// its future's callback, which the server's executor runs on an io thread
// and which posts the response to the connection's strand.
//
//   std::unique_ptr<spool::http::HttpServer> server;
//   Status s = spool::http::HttpServer::Create(server_options, &server);
//   s = server->Start();                       // listens; /readyz says 503
//   options.callback_executor = server->executor();
//   s = spool::Runtime::Open(options, &runtime);  // recovery
//   ... register handlers, runtime->Start() ...
//   server->AttachRuntime(runtime.get());      // /v1 and /readyz now serve
//   ... wait for SIGTERM ...
//   server->Stop();                            // no new requests; in-flight
//   finish Result<void> closed = runtime->Close().Wait(); server.reset(); // io
//   threads end
//
// Thread safety: every method may be called from any thread.

#ifndef SPOOL_INCLUDE_HTTP_HTTP_SERVER_H_
#define SPOOL_INCLUDE_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <memory>

#include <spool/future.h>
#include <spool/http/server_options.h>
#include <spool/runtime.h>
#include <spool/status.h>

namespace spool::http {

class HttpServer {
 public:
  // Checks `options` (Validate), loads the token file if one is named (its
  // permissions checked, see LoadBearerToken) and creates the io loop; no
  // socket is opened yet. Returns the first error.
  // REQUIRES: server != nullptr.
  static Status Create(ServerOptions options,
                       std::unique_ptr<HttpServer>* server);

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Stops (see Stop), ends the io threads and waits for them. Callbacks
  // posted to executor() afterwards are dropped, never run.
  virtual ~HttpServer() = default;

  // Runs callbacks on the io threads: pass it as Options::callback_executor
  // so that spool's future callbacks, events and live-query results reach
  // the server without another thread. Valid for the server's lifetime and
  // after (it keeps the io loop alive, stopped).
  virtual std::shared_ptr<Executor> executor() const = 0;

  // Binds options.listen and starts accepting, on the io threads it starts.
  // Until AttachRuntime, /healthz answers 200 and every other path 503.
  // InvalidArgument for an unusable listen address, IOError when the
  // address cannot be bound (e.g. in use), FailedPrecondition when already
  // started.
  virtual Status Start() = 0;

  // The port listened on (the one picked, for port 0); 0 before Start.
  virtual uint16_t port() const = 0;

  // Serves the API from `runtime`, which must be started (its recovery
  // done) and must outlive Stop. Called once.
  virtual void AttachRuntime(Runtime* runtime) = 0;

  // A cluster node's new role (spool/http/cluster.h): serves `runtime` in
  // place of the one before, or answers 503 for null; `primary` is the URL
  // a standby's 421 answers name (empty on a primary). Ends the event
  // streams and live listings of the runtime it replaces; requests in
  // flight finish on the runtime they started on, so every runtime it
  // served must outlive Stop (a closed one answers Closed).
  virtual void SwapRuntime(Runtime* runtime, std::string primary) = 0;

  // Stops taking connections and requests; lets requests in flight finish
  // for up to options.stop_timeout; closes every event stream and idle
  // connection. The io threads keep running (spool's callbacks still need
  // them while the runtime closes) until the destructor. Blocks the caller
  // for at most stop_timeout plus a moment. Idempotent.
  virtual void Stop() = 0;

 protected:
  HttpServer() = default;
};

}  // namespace spool::http

#endif  // SPOOL_INCLUDE_HTTP_HTTP_SERVER_H_

// RuntimeImpl's part in remote workers: the gateway's life
// (actors/gateway.h, docs/scale-out.md).

#include <spool/secret_file.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/publish.hpp>
#include <spdlog/spdlog.h>

#include "actors/gateway_door.h"
#include "runtime/runtime_impl.h"
#include "util/logging.h"

namespace spool {

void LoadMiddleman(caf::actor_system_config* config) {
  config->load<caf::io::middleman>();
  actors::RegisterRemoteTypes(config);
}

void CloseNamedActors(caf::actor_system& system) {
  // CAF registers these by name, and the middleman hands a peer's message
  // to them unchecked: ConfigServ keeps whatever a peer puts in it (an
  // unbounded store), SpawnServ spawns on request. spool uses neither.
  system.registry().erase(caf::atom("ConfigServ"));
  system.registry().erase(caf::atom("SpawnServ"));
}

Status RuntimeImpl::StartGateway() {
  std::string secret;
  Status s = LoadSecretFile("remote.secret_file", options_.remote_secret_file,
                            &secret);
  if (!s.ok()) return s;
  // Validate() checked the form "HOST:PORT".
  const std::string& listen = options_.remote_listen;
  size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  auto port = static_cast<uint16_t>(std::stoi(listen.substr(colon + 1)));
  actors::GatewayConfig config;
  config.scheduler = scheduler_;
  config.writer = writer_;
  config.store = store_.get();
  config.start_log = start_log_.get();
  config.clock = clock_;
  config.max_result_bytes = options_.max_result_bytes;
  config.lease = options_.remote_lease;
  config.heartbeat = options_.remote_heartbeat;
  config.claim_ahead = static_cast<uint32_t>(options_.remote_claim_ahead);
  config.rate_buckets = rate_buckets_;
  gateway_ = actors::SpawnGateway(*actor_system_, std::move(config));
  gateway_door_ =
      actors::SpawnGatewayDoor(*actor_system_, gateway_, std::move(secret));
  CloseNamedActors(*actor_system_);
  const char* in = host.empty() ? nullptr : host.c_str();
  const bool tls = RemoteTls().enabled();
  auto published =
      tls ? caf::openssl::publish(gateway_door_, port, in, /*reuse=*/true)
          : actor_system_->middleman().publish(gateway_door_, port, in,
                                               /*reuse_addr=*/true);
  if (!published) {
    caf::anon_send(gateway_door_, actors::DoorStop{});
    gateway_door_ = nullptr;
    caf::anon_send(gateway_, actors::stop_atom::value);
    gateway_ = nullptr;
    return Status::IOError(
        "remote.listen \"" + listen +
        "\": cannot listen there: " + actor_system_->render(published.error()));
  }
  gateway_port_ = *published;
  Logger()->info("remote workers' gateway listens on {}:{} ({})", host,
                 gateway_port_,
                 tls ? "TLS, worker certificates required" : "plain BASP");
  return Status::OK();
}

void RuntimeImpl::StopGateway() {
  if (!gateway_) return;
  // Its leases are settled as interrupted before the scheduler is asked to
  // stop, so that the stop does not wait for remote handlers.
  static_cast<void>(
      actor_system_->middleman().unpublish(gateway_door_, gateway_port_));
  caf::anon_send(gateway_door_, actors::DoorStop{});
  gateway_door_ = nullptr;
  // It quits once it has settled them.
  caf::anon_send(gateway_, actors::stop_atom::value);
  gateway_ = nullptr;
}

}  // namespace spool

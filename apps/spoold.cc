// spoold: a spool queue behind an HTTP server (docs/server.md).
//
//   spoold [--config FILE] [--set section.key=value]... [--print-config]
//
// Opens the runtime from the config's [storage]/[runtime]/... sections,
// registers the built-in handlers ([handlers.NAME]), and serves the REST
// API, event streams, /metrics and the page at / on [server] listen. On
// SIGTERM or SIGINT it stops accepting, lets requests in flight finish,
// closes the runtime within runtime.close_timeout_ms and exits 0.
//
// To serve your own handlers, copy this file, register them where the
// built-in ones are registered, and link spool::http and spool::spool
// (docs/server.md, "Your own spoold").

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <memory>
#include <pthread.h>
#include <string>
#include <vector>

#include <spool/http/builtin_handlers.h>
#include <spool/http/http_server.h>
#include <spool/http/spoold_config.h>
#include <spool/http/standby.h>
#include <spool/runtime.h>

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "spoold: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spoold: a durable spool task queue served over HTTP", "spoold"};
  std::string config_path;
  std::vector<std::string> overrides;
  bool print_config = false;
  app.add_option("--config", config_path,
                 "TOML config file (config/spool.toml documents it)");
  app.add_option("--set", overrides,
                 "override one key: section.key=value (repeatable)");
  app.add_flag("--print-config", print_config,
               "print the configuration in effect and exit");
  CLI11_PARSE(app, argc, argv);

  spool::http::SpooldConfig config;
  // The path is required; the documented default, as in config/spool.toml.
  config.runtime.path = "./spool-data";
  spool::Status s =
      spool::http::LoadSpooldConfig(config_path, overrides, &config);
  if (!s.ok()) {
    std::fprintf(stderr, "spoold: %s\n", s.ToString().c_str());
    return 2;
  }
  if (print_config) {
    std::fputs(spool::http::DescribeSpooldConfig(config).c_str(), stdout);
    return 0;
  }

  const spool::Options& runtime_options = config.runtime;
  const bool standby =
      runtime_options.replication_role == spool::ReplicationRole::kStandby;
  const bool serves_standbys =
      runtime_options.serve_standbys ||
      runtime_options.durability == spool::Durability::kReplicated;
  if (serves_standbys || standby) {
    if (runtime_options.replication_secret_file.empty()) {
      return Fail(
          "replication.secret_file is required: standbys present it to the "
          "primary's /v1/replication routes");
    }
  }
  if (serves_standbys && !standby) {
    config.server.replication_secret_file =
        runtime_options.replication_secret_file;
    // Beside the store, outside it: the base backups standbys copy.
    config.server.replication_base_dir = runtime_options.path + ".standby-base";
  }
  if (standby) {
    config.server.replication_primary = runtime_options.replication_primary;
  }

  // SIGTERM and SIGINT are taken by sigwait below; blocked before any
  // thread starts, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // Listen first: /healthz answers and /readyz says 503 during recovery.
  std::unique_ptr<spool::http::HttpServer> server;
  s = spool::http::HttpServer::Create(config.server, &server);
  if (s.ok()) s = server->Start();
  if (!s.ok()) return Fail(s.ToString());
  const bool tls = !config.server.tls_certificate_file.empty();
  std::fprintf(stderr, "spoold: listening on %s (port %u, %s)\n",
               config.server.listen.c_str(),
               static_cast<unsigned>(server->port()),
               tls ? (config.server.tls_client_ca_file.empty()
                          ? "HTTPS"
                          : "HTTPS, client certificates required")
                   : "plain HTTP");

  // spool's callbacks (enqueue acknowledgements, events, live queries) run
  // on the server's io threads.
  config.runtime.callback_executor = server->executor();
  std::unique_ptr<spool::Runtime> runtime;
  s = spool::Runtime::Open(config.runtime, &runtime);
  if (!s.ok()) return Fail("open " + config.runtime.path + ": " + s.ToString());

  std::unique_ptr<spool::http::StandbyFollower> follower;
  if (standby) {
    // A standby runs nothing: its copy follows the primary's commits.
    s = spool::http::StandbyFollower::Start(runtime.get(), config.runtime,
                                            &follower);
  } else {
    // Your own handlers go here, beside the built-in ones.
    s = spool::http::RegisterBuiltinHandlers(runtime.get(), config.handlers);
    if (s.ok()) s = runtime->Start();
  }
  if (!s.ok()) return Fail(s.ToString());
  server->AttachRuntime(runtime.get());
  std::fprintf(stderr, "spoold: ready%s\n", standby ? " (standby)" : "");

  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::fprintf(stderr, "spoold: %s: stopping\n",
               signal == SIGTERM ? "SIGTERM" : "SIGINT");

  server->Stop();
  follower.reset();
  spool::Result<void> closed = runtime->Close().Wait();
  server.reset();
  runtime.reset();
  if (!closed.ok()) {
    // TimedOut: handlers still ran at close_timeout_ms; their tasks are
    // recovered at the next start.
    std::fprintf(stderr, "spoold: close: %s\n",
                 closed.status().ToString().c_str());
    return closed.status().IsTimedOut() ? 0 : 1;
  }
  std::fprintf(stderr, "spoold: stopped\n");
  return 0;
}

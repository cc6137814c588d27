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
#include <mutex>
#include <pthread.h>
#include <string>
#include <vector>

#include <spool/http/builtin_handlers.h>
#include <spool/http/cluster.h>
#include <spool/http/http_server.h>
#include <spool/http/log_line.h>
#include <spool/http/spoold_config.h>
#include <spool/http/standby.h>
#include <spool/runtime.h>

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "spoold: %s\n", message.c_str());
  return 1;
}

// ---- Cluster mode (spool/http/cluster.h, docs/replication.md) ----

// This node's runtime in its current role, and those it had before: a
// runtime the server once served must outlive the server's Stop.
class ClusterRuntimes {
 public:
  ClusterRuntimes(spool::http::SpooldConfig config,
                  spool::http::HttpServer* server)
      : config_(std::move(config)), server_(server) {}

  ~ClusterRuntimes() { Retire(); }

  // The node's status_fn: the runtime's replication status, or nothing.
  spool::ReplicationStatus Status() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (current_ == nullptr) return spool::ReplicationStatus{};
    return current_->GetReplicationStatus();
  }

  // Takes `role`: reopens the runtime when it changes sides, starts or
  // stops the standby's follower, and serves the result.
  spool::Status Take(const spool::http::ClusterRole& role,
                     spool::http::ClusterNode* node) {
    using Kind = spool::http::ClusterRole::Kind;
    server_->SwapRuntime(nullptr, "");
    StopFollowing();
    bool want_primary = role.kind == Kind::kPrimary;
    if (current_ != nullptr && primary_ != want_primary) Retire();
    if (current_ == nullptr) {
      if (spool::Status s = Open(want_primary); !s.ok()) return s;
    }
    if (role.kind == Kind::kPrimary) {
      // Fenced before the first commit can be acknowledged.
      current_->FenceAcknowledgements(node->lease_deadline());
      // What it applied last as a standby: the standbys just behind it
      // follow on from there rather than copying a base.
      spool::Status seeded =
          current_->SeedReplicationLog(recent_log_, std::move(recent_));
      recent_.clear();
      if (!seeded.ok()) {
        spool::http::LogLine("cluster: the standbys behind will copy a base: " +
                             seeded.ToString());
      }
      spool::Result<void> begun = current_->BeginEpoch(role.epoch).Wait();
      if (!begun.ok()) return begun.status().WithContext("beginning the epoch");
      server_->SwapRuntime(current_, "");
    } else if (role.kind == Kind::kStandby) {
      spool::Options options = config_.runtime;
      options.replication_primary = role.primary_url;
      options.replication_name = config_.cluster.name;
      spool::Status s =
          spool::http::StandbyFollower::Start(current_, options, &follower_,
                                              /*keep_recent=*/true);
      if (!s.ok()) return s;
      server_->SwapRuntime(current_, role.primary_url);
    }
    // A candidate serves nothing but health: 503 until a leader is known.
    return spool::Status::OK();
  }

  void Fence(spool::http::ClusterNode* node) {
    if (current_ != nullptr && primary_) {
      current_->FenceAcknowledgements(node->lease_deadline());
    }
  }

  // Closes the runtime in use (the server no longer serves it).
  void Retire() {
    StopFollowing();
    if (current_ == nullptr) return;
    spool::Result<void> closed = current_->Close().Wait();
    if (!closed.ok()) {
      std::fprintf(stderr, "spoold: close: %s\n",
                   closed.status().ToString().c_str());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = nullptr;
  }

 private:
  spool::Status Open(bool primary) {
    spool::Options options = config_.runtime;
    options.replication_role = primary ? spool::ReplicationRole::kPrimary
                                       : spool::ReplicationRole::kStandby;
    options.replication_name = config_.cluster.name;
    options.callback_executor = server_->executor();
    std::unique_ptr<spool::Runtime> runtime;
    spool::Status s = spool::Runtime::Open(options, &runtime);
    if (!s.ok()) return s.WithContext("open " + options.path);
    if (primary) {
      s = spool::http::RegisterBuiltinHandlers(runtime.get(), config_.handlers);
      if (s.ok()) s = runtime->Start();
      if (!s.ok()) return s;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = runtime.get();
    primary_ = primary;
    all_.push_back(std::move(runtime));
    return spool::Status::OK();
  }

  // Stops the follower, keeping the commits it applied last.
  void StopFollowing() {
    if (follower_ == nullptr) return;
    follower_->Stop();
    recent_ = follower_->TakeRecent(&recent_log_);
    follower_.reset();
  }

  const spool::http::SpooldConfig config_;
  spool::http::HttpServer* const server_;
  std::unique_ptr<spool::http::StandbyFollower> follower_;
  // The commits the last follower applied last, and their log.
  std::vector<spool::ReplicatedCommit> recent_;
  uint64_t recent_log_ = 0;
  std::mutex mutex_;
  spool::Runtime* current_ = nullptr;  // GUARDED_BY(mutex_) for Status
  bool primary_ = false;
  std::vector<std::unique_ptr<spool::Runtime>> all_;
};

// Serves as the cluster's etcd says, until SIGTERM or SIGINT.
int RunCluster(spool::http::SpooldConfig config,
               spool::http::HttpServer* server, const sigset_t& stop_signals) {
  if (config.runtime.durability != spool::Durability::kReplicated) {
    return Fail(
        "[cluster] needs storage.durability = \"replicated\": a standby "
        "promoted at a failover must hold every acknowledged task");
  }
  ClusterRuntimes runtimes(config, server);
  std::unique_ptr<spool::http::ClusterNode> node;
  spool::Status s = spool::http::ClusterNode::Start(
      config.cluster, config.runtime.replication_min_acks,
      [&runtimes] { return runtimes.Status(); }, &node);
  if (!s.ok()) return Fail(s.ToString());
  spool::http::LogLine("cluster: " + config.cluster.name + " joins, one of " +
                       std::to_string(config.cluster.nodes.size()) + " nodes");
  spool::http::ClusterRole role;
  // A candidate's runtime: a standby that follows no one.
  s = runtimes.Take(role, node.get());
  if (!s.ok()) {
    server->Stop();
    return Fail(s.ToString());
  }
  node->Applied(role);
  const timespec poll{0, 20 * 1000 * 1000};
  int signal = 0;
  while ((signal = sigtimedwait(&stop_signals, nullptr, &poll)) < 0) {
    runtimes.Fence(node.get());
    spool::http::ClusterRole next =
        node->WaitForRole(role, std::chrono::milliseconds(0));
    if (next == role) continue;
    spool::http::LogLine(
        std::string("cluster: ") + spool::http::RoleName(role.kind) + " -> " +
        spool::http::RoleName(next.kind) + " (epoch " +
        std::to_string(next.epoch) +
        (next.primary_url.empty() ? "" : ", primary " + next.primary_url) +
        ")");
    s = runtimes.Take(next, node.get());
    if (!s.ok()) {
      // No role can be trusted now: out of the cluster (the node's lease
      // is revoked, so another is elected at once), the server stopped
      // before the runtimes it served go.
      spool::http::LogLine("cluster: taking the role failed: " + s.ToString());
      server->Stop();
      runtimes.Retire();
      return Fail(s.ToString());
    }
    role = next;
    node->Applied(role);
    if (role.kind == spool::http::ClusterRole::Kind::kPrimary) {
      spool::http::LogLine("ready (primary, epoch " +
                           std::to_string(role.epoch) + ")");
    }
  }
  std::fprintf(stderr, "spoold: %s: stopping\n",
               signal == SIGTERM ? "SIGTERM" : "SIGINT");
  server->Stop();
  runtimes.Retire();
  node.reset();
  std::fprintf(stderr, "spoold: stopped\n");
  return 0;
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

  if (config.cluster.enabled()) {
    return RunCluster(config, server.get(), stop_signals);
  }

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

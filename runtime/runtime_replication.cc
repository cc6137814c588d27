// The runtime's side of replication (spool/replication.h): a primary's log
// for its standbys, and a standby's open, apply and rebase.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/runtime_impl.h"
#include "util/logging.h"

namespace spool {
namespace {

constexpr uint64_t kMinFollowBytes = 1 << 10;
constexpr uint64_t kMaxFollowBytes = uint64_t{256} << 20;
constexpr auto kMaxFollowWait = std::chrono::seconds(60);

bool ValidStandbyName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

Status CheckFollowRequest(const FollowRequest& request) {
  if (!ValidStandbyName(request.standby)) {
    return Status::InvalidArgument(
        "standby name: expected 1 to 64 of [A-Za-z0-9._-], got \"" +
        request.standby.substr(0, 80) + "\"");
  }
  if (request.max_bytes < kMinFollowBytes ||
      request.max_bytes > kMaxFollowBytes) {
    return Status::InvalidArgument(
        "max_bytes must be in [1024, 268435456], got " +
        std::to_string(request.max_bytes));
  }
  if (request.wait.count() < 0 || request.wait > kMaxFollowWait) {
    return Status::InvalidArgument("wait must be in [0, 60000] ms, got " +
                                   std::to_string(request.wait.count() / 1000) +
                                   " ms");
  }
  return Status::OK();
}

Status NotStandby(std::string_view call) {
  return Status::FailedPrecondition(
      std::string(call) +
      " is for a standby (replication.role = \"standby\"); this runtime is "
      "a primary");
}

}  // namespace

std::shared_ptr<actors::ReplicationLog> RuntimeImpl::MakeReplicationLog() {
  // The log continues across a restart when the store holds exactly what
  // its standbys were sent: nothing was written around the commits while
  // it opened, every commit was synced (a relaxed store may have lost
  // commits a standby holds, and would then write others in their place),
  // and the last primary here closed cleanly (commits ship before their
  // sync: one that crashed may have shipped a commit its disk never got).
  uint64_t log_id = 0;
  bool synced = options_.durability != Durability::kRelaxed;
  bool was_shipping = true;
  if (!store_->WasShipping(&was_shipping).ok()) was_shipping = true;
  if (!store_->FollowedLog(&log_id).ok()) log_id = 0;
  if (!synced || was_shipping || store_->side_writes() != 0 || log_id == 0) {
    if (was_shipping && log_id != 0) {
      Logger()->warn(
          "replication: the last primary on {} did not close cleanly; its "
          "standbys copy a new base",
          options_.path);
    }
    log_id = actors::NewLogId();
    Status s = store_->MarkFollowing(log_id);
    if (!s.ok()) {
      Logger()->warn("replication: recording the log id failed: {}",
                     s.ToString());
    }
  }
  // Before the first commit ships (recovery's, in this open).
  if (Status s = store_->BeginShipping(); !s.ok()) {
    Logger()->warn("replication: recording the shipping mark failed: {}",
                   s.ToString());
  }
  actors::ReplicationLogConfig config;
  config.max_bytes = options_.replication_log_bytes;
  config.min_acks = options_.durability == Durability::kReplicated
                        ? options_.replication_min_acks
                        : 0;
  config.ack_timeout = options_.replication_ack_timeout;
  config.executor = executor_;
  config.on_acked = [this](uint64_t of_log, uint64_t position) {
    if (auto writer = weak_writer_.lock()) {
      caf::anon_send(caf::actor_cast<actors::writer_actor>(writer),
                     actors::replicated_atom::value, of_log, position);
    }
  };
  auto log = std::make_shared<actors::ReplicationLog>(
      std::move(config), log_id, store_->committed_batches());
  std::vector<storage::EpochStart> epochs;
  Status s = store_->ReadEpochs(&epochs);
  if (!s.ok()) {
    Logger()->warn("replication: reading the cluster epochs failed: {}",
                   s.ToString());
  }
  log->SetEpochs(std::move(epochs));
  return log;
}

void RuntimeImpl::FollowLog(FollowRequest request,
                            std::function<void(Result<FollowChunk>)> done) {
  CallGuard guard(this);
  auto fail = [&](const Status& s) {
    executor_->Post([done = std::move(done), s] { done(s); });
  };
  if (guard.closed()) return fail(ClosedError());
  if (!replication_log_) {
    return fail(Status::FailedPrecondition(
        "this runtime serves no standbys: set replication.serve_standbys, "
        "or storage.durability = \"replicated\""));
  }
  if (Status s = CheckFollowRequest(request); !s.ok()) return fail(s);
  replication_log_->Follow(
      std::move(request),
      [done = std::move(done)](FollowChunk chunk) { done(std::move(chunk)); });
}

ReplicationStatus RuntimeImpl::GetReplicationStatus() {
  CallGuard guard(this);
  ReplicationStatus status;
  status.role = standby_ ? "standby" : "primary";
  if (guard.closed() || !store_) return status;
  status.position = store_->committed_batches();
  if (replication_log_) {
    replication_log_->Describe(&status);
    return status;
  }
  if (standby_) static_cast<void>(store_->FollowedLog(&status.log_id));
  std::vector<storage::EpochStart> epochs;
  if (store_->ReadEpochs(&epochs).ok() && !epochs.empty()) {
    status.epoch = epochs.back().epoch;
  }
  return status;
}

Status RuntimeImpl::SeedReplicationLog(uint64_t log_id,
                                       std::vector<ReplicatedCommit> commits) {
  CallGuard guard(this);
  if (guard.closed()) return ClosedError();
  if (!replication_log_) {
    return Status::FailedPrecondition(
        "SeedReplicationLog: this runtime serves no standbys");
  }
  if (commits.empty()) return Status::OK();
  if (log_id != replication_log_->log_id()) {
    return Status::InvalidArgument(
        "SeedReplicationLog: the commits are of log " + std::to_string(log_id) +
        ", and this primary writes log " +
        std::to_string(replication_log_->log_id()));
  }
  return replication_log_->Seed(std::move(commits));
}

Future<void> RuntimeImpl::BeginEpoch(uint64_t epoch) {
  CallGuard guard(this);
  if (guard.closed()) return Failed<void>(ClosedError(), executor_);
  if (standby_) {
    return Failed<void>(
        Status::FailedPrecondition("BeginEpoch is for a primary; this runtime "
                                   "is a standby (replication.role)"),
        executor_);
  }
  if (read_only_ || epoch == 0) {
    return Failed<void>(
        read_only_ ? ReadOnlyError("BeginEpoch")
                   : Status::InvalidArgument("BeginEpoch: epoch 0 is none"),
        executor_);
  }
  auto promise = NewPromise<void>();
  actors::Completion done = [this, promise](const Status& status) {
    // On the writer's thread, before its next commit: the log hears of the
    // epoch before any standby could ask for a later commit.
    if (status.ok() && replication_log_) {
      std::vector<storage::EpochStart> epochs;
      Status s = store_->ReadEpochs(&epochs);
      if (!s.ok()) {
        promise.Set(Result<void>(s));
        return;
      }
      replication_log_->SetEpochs(std::move(epochs));
    }
    promise.Set(Result<void>(status));
  };
  caf::anon_send(writer_, actors::epoch_atom::value, epoch, std::move(done));
  return promise.GetFuture();
}

void RuntimeImpl::FenceAcknowledgements(
    std::chrono::steady_clock::time_point until) {
  fence_->Set(until);
}

Future<uint64_t> RuntimeImpl::ApplyReplicated(
    uint64_t log_id, std::vector<ReplicatedCommit> commits) {
  CallGuard guard(this);
  if (guard.closed()) return Failed<uint64_t>(ClosedError(), executor_);
  if (!standby_)
    return Failed<uint64_t>(NotStandby("ApplyReplicated"), executor_);
  Promise<uint64_t> promise = NewPromise<uint64_t>();
  actors::ApplyJob job;
  job.log_id = log_id;
  job.commits = std::move(commits);
  job.done = [promise](const Result<uint64_t>& r) { promise.Set(r); };
  caf::anon_send(replica_, actors::apply_atom::value, std::move(job));
  return promise.GetFuture();
}

Future<uint64_t> RuntimeImpl::Rebase(std::string backup_dir, uint64_t log_id) {
  CallGuard guard(this);
  if (guard.closed()) return Failed<uint64_t>(ClosedError(), executor_);
  if (!standby_) return Failed<uint64_t>(NotStandby("Rebase"), executor_);
  Promise<uint64_t> promise = NewPromise<uint64_t>();
  actors::RebaseJob job;
  job.backup_dir = std::move(backup_dir);
  job.log_id = log_id;
  job.done = [promise](const Result<uint64_t>& r) { promise.Set(r); };
  caf::anon_send(replica_, actors::rebase_atom::value, std::move(job));
  return promise.GetFuture();
}

}  // namespace spool

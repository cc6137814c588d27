#include "actors/replication_log.h"

#include <algorithm>
#include <random>
#include <utility>

#include "util/thread_name.h"

namespace spool::actors {
namespace {

using Clock = std::chrono::steady_clock;

std::string Gone(uint64_t applied, uint64_t oldest) {
  return "the log no longer holds the commit after position " +
         std::to_string(applied) + "; it starts at position " +
         std::to_string(oldest);
}

}  // namespace

uint64_t NewLogId() {
  std::random_device device;
  std::mt19937_64 generator((uint64_t{device()} << 32) ^ device());
  uint64_t id = 0;
  while (id == 0) id = generator();
  return id;
}

ReplicationLog::ReplicationLog(ReplicationLogConfig config, uint64_t log_id,
                               uint64_t last_position)
    : config_(std::move(config)),
      log_id_(log_id),
      last_position_(last_position),
      acked_(last_position) {
  expirer_ = std::thread([this] {
    NameThisThread("spool-repl-log");
    ExpireWaiters();
  });
}

ReplicationLog::~ReplicationLog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  wake_.notify_all();
  expirer_.join();
}

uint64_t ReplicationLog::log_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return log_id_;
}

void ReplicationLog::Append(uint64_t position, std::string data) {
  // Only the writer appends and starts over, so the test and the start
  // need not be one step.
  bool gap = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gap = position != last_position_ + 1;
  }
  if (gap) StartOver(position - 1);
  std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>> replies;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    bytes_ += data.size();
    entries_.push_back({position, std::move(data)});
    last_position_ = position;
    while (bytes_ > config_.max_bytes && entries_.size() > 1) {
      bytes_ -= entries_.front().data.size();
      entries_.pop_front();
    }
    for (Waiter& w :
         TakeWaiters([this](const Waiter& w) { return Ready(w.request); })) {
      replies.emplace_back(std::move(w.done), Answer(w.request));
    }
  }
  Reply(std::move(replies));
}

std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>>
ReplicationLog::Restart(uint64_t last_position, bool retract) {
  log_id_ = NewLogId();
  entries_.clear();
  bytes_ = 0;
  last_position_ = last_position;
  if (retract) {
    // The standbys may hold the retracted commit: until they copy a new
    // base, they count as holding nothing after `last_position`.
    acked_ = std::min(acked_, last_position);
    for (auto& [name, standby] : standbys_) {
      standby.applied = std::min(standby.applied, last_position);
    }
  } else {
    acked_ = std::max(acked_, last_position);
  }
  std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>> replies;
  for (Waiter& w : TakeWaiters([](const Waiter&) { return true; })) {
    replies.emplace_back(std::move(w.done), Answer(w.request));
  }
  return replies;
}

void ReplicationLog::StartOver(uint64_t last_position) {
  std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>> replies;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    replies = Restart(last_position, /*retract=*/false);
  }
  Reply(std::move(replies));
}

void ReplicationLog::Retract(uint64_t last_position) {
  std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>> replies;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    replies = Restart(last_position, /*retract=*/true);
  }
  Reply(std::move(replies));
}

Status ReplicationLog::Seed(std::vector<ReplicatedCommit> commits) {
  if (commits.empty()) return Status::OK();
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t oldest =
      entries_.empty() ? last_position_ + 1 : entries_.front().position;
  for (size_t i = 1; i < commits.size(); ++i) {
    if (commits[i].position != commits[i - 1].position + 1) {
      return Status::InvalidArgument(
          "seed: commit " + std::to_string(commits[i].position) +
          " does not follow commit " + std::to_string(commits[i - 1].position));
    }
  }
  if (commits.back().position + 1 != oldest) {
    return Status::InvalidArgument("seed: the commits end at position " +
                                   std::to_string(commits.back().position) +
                                   ", and the log starts at " +
                                   std::to_string(oldest));
  }
  // Newest first, until the bound: the log's own entries stay whole.
  for (auto it = commits.rbegin(); it != commits.rend(); ++it) {
    if (bytes_ + it->data.size() > config_.max_bytes && !entries_.empty())
      break;
    bytes_ += it->data.size();
    entries_.push_front({it->position, std::move(it->data)});
  }
  return Status::OK();
}

void ReplicationLog::SetEpochs(std::vector<storage::EpochStart> epochs) {
  std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>> replies;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    epochs_ = std::move(epochs);
    // A waiting standby of an older epoch may have diverged: it hears so
    // now, not at its wait's end.
    for (Waiter& w : TakeWaiters([this](const Waiter& w) {
           return !CannotFollow(w.request).empty();
         })) {
      replies.emplace_back(std::move(w.done), Answer(w.request));
    }
  }
  Reply(std::move(replies));
}

bool ReplicationLog::Ready(const FollowRequest& request) const {
  return request.log_id != log_id_ || request.applied != last_position_ ||
         request.epoch > epoch();
}

std::string ReplicationLog::Diverged(const FollowRequest& request) const {
  if (request.epoch >= epoch()) return "";
  auto next = std::find_if(
      epochs_.begin(), epochs_.end(),
      [&](const storage::EpochStart& e) { return e.epoch > request.epoch; });
  if (next == epochs_.begin() && epochs_.size() >= storage::kMaxEpochsKept) {
    return "the standby's epoch " + std::to_string(request.epoch) +
           " is older than every epoch this primary keeps";
  }
  if (request.applied < next->first_position) return "";
  return "the standby holds commits of epoch " + std::to_string(request.epoch) +
         " up to position " + std::to_string(request.applied) + ", but epoch " +
         std::to_string(next->epoch) + " began at position " +
         std::to_string(next->first_position) +
         ": they were never acknowledged, and were replaced";
}

std::string ReplicationLog::CannotFollow(const FollowRequest& request) const {
  if (request.log_id != log_id_) {
    return request.log_id == 0
               ? "the standby follows no log yet"
               : "the standby follows log " + std::to_string(request.log_id) +
                     ", and this primary writes log " +
                     std::to_string(log_id_) +
                     " (it restarted, or wrote around its commits)";
  }
  if (std::string why = Diverged(request); !why.empty()) return why;
  if (request.applied > last_position_) {
    return "the standby is at position " + std::to_string(request.applied) +
           ", beyond this primary's " + std::to_string(last_position_) +
           ": it holds commits the primary does not";
  }
  uint64_t oldest =
      entries_.empty() ? last_position_ + 1 : entries_.front().position;
  if (request.applied + 1 < oldest && request.applied != last_position_) {
    return Gone(request.applied, oldest);
  }
  return "";
}

FollowChunk ReplicationLog::Answer(const FollowRequest& request) const {
  FollowChunk chunk;
  chunk.log_id = log_id_;
  chunk.epoch = epoch();
  chunk.primary_position = last_position_;
  if (request.epoch > epoch()) {
    chunk.stale_primary = true;
    chunk.why = "the standby applied commits of epoch " +
                std::to_string(request.epoch) + ", and this primary leads " +
                (epoch() == 0 ? std::string("no epoch")
                              : "epoch " + std::to_string(epoch())) +
                ": it was deposed; follow the current leader";
    return chunk;
  }
  chunk.why = CannotFollow(request);
  if (!chunk.why.empty()) {
    chunk.gone = true;
    return chunk;
  }
  if (request.applied == last_position_) return chunk;
  uint64_t oldest =
      entries_.empty() ? last_position_ + 1 : entries_.front().position;
  uint64_t bytes = 0;
  for (size_t i = request.applied + 1 - oldest; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (!chunk.commits.empty() && bytes + e.data.size() > request.max_bytes)
      break;
    bytes += e.data.size();
    chunk.commits.push_back({e.position, e.data});
  }
  return chunk;
}

void ReplicationLog::Follow(FollowRequest request,
                            std::function<void(FollowChunk)> done) {
  std::optional<uint64_t> acked;
  uint64_t acked_log = 0;
  std::optional<FollowChunk> now_answer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Clock::time_point now = Clock::now();
    bool follows =
        request.epoch <= epoch() && CannotFollow(request).empty() && !closing_;
    if (follows) {
      Standby& standby = standbys_[request.standby];
      standby.applied = request.applied;
      standby.last_seen = now;
      if (UpdateAcked(now)) {
        acked = acked_;
        acked_log = log_id_;
      }
    }
    if (!follows || Ready(request) || request.wait.count() <= 0) {
      now_answer = Answer(request);
    } else {
      ++standbys_[request.standby].waiting;
      Clock::time_point deadline =
          now + std::chrono::duration_cast<Clock::duration>(request.wait);
      waiters_.push_back({std::move(request), std::move(done), deadline});
    }
  }
  if (now_answer) {
    Reply({{std::move(done), std::move(*now_answer)}});
  } else {
    wake_.notify_all();
  }
  if (acked) NotifyAcked(acked_log, *acked);
}

bool ReplicationLog::IsConnected(const Standby& standby,
                                 Clock::time_point now) const {
  return standby.waiting > 0 || now - standby.last_seen <= config_.ack_timeout;
}

bool ReplicationLog::UpdateAcked(Clock::time_point now) {
  if (config_.min_acks == 0) return false;
  std::vector<uint64_t> applied;
  for (const auto& [name, standby] : standbys_) {
    if (IsConnected(standby, now)) applied.push_back(standby.applied);
  }
  if (applied.size() < config_.min_acks) return false;
  std::nth_element(applied.begin(), applied.begin() + (config_.min_acks - 1),
                   applied.end(), std::greater<uint64_t>());
  uint64_t position = applied[config_.min_acks - 1];
  if (position <= acked_) return false;
  acked_ = position;
  return true;
}

uint32_t ReplicationLog::Connected() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Clock::time_point now = Clock::now();
  uint32_t connected = 0;
  for (const auto& [name, standby] : standbys_) {
    connected += IsConnected(standby, now) ? 1 : 0;
  }
  return connected;
}

void ReplicationLog::Describe(ReplicationStatus* status) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Clock::time_point now = Clock::now();
  status->log_id = log_id_;
  status->epoch = epoch();
  status->oldest_kept =
      entries_.empty() ? last_position_ + 1 : entries_.front().position;
  status->log_bytes = bytes_;
  status->min_acks = config_.min_acks;
  status->standbys.clear();
  for (const auto& [name, standby] : standbys_) {
    StandbyInfo info;
    info.name = name;
    info.applied = standby.applied;
    info.connected = IsConnected(standby, now);
    for (auto it = entries_.rbegin();
         it != entries_.rend() && it->position > standby.applied; ++it) {
      info.lag_bytes += it->data.size();
    }
    status->standbys.push_back(std::move(info));
  }
}

std::vector<ReplicationLog::Waiter> ReplicationLog::TakeWaiters(
    const std::function<bool(const Waiter&)>& ready) {
  std::vector<Waiter> taken;
  auto keep = std::partition(waiters_.begin(), waiters_.end(),
                             [&](const Waiter& w) { return !ready(w); });
  for (auto it = keep; it != waiters_.end(); ++it) {
    auto standby = standbys_.find(it->request.standby);
    if (standby != standbys_.end() && standby->second.waiting > 0) {
      --standby->second.waiting;
      standby->second.last_seen = Clock::now();
    }
    taken.push_back(std::move(*it));
  }
  waiters_.erase(keep, waiters_.end());
  return taken;
}

void ReplicationLog::Reply(
    std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>>
        replies) {
  for (auto& [done, chunk] : replies) {
    auto shared = std::make_shared<FollowChunk>(std::move(chunk));
    config_.executor->Post(
        [done = std::move(done), shared] { done(std::move(*shared)); });
  }
}

void ReplicationLog::NotifyAcked(uint64_t log_id, uint64_t position) {
  if (config_.on_acked) config_.on_acked(log_id, position);
}

void ReplicationLog::ExpireWaiters() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (closing_) break;
    Clock::time_point next = Clock::time_point::max();
    for (const Waiter& w : waiters_) next = std::min(next, w.deadline);
    if (next == Clock::time_point::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, next);
    }
    Clock::time_point now = Clock::now();
    std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>>
        replies;
    for (Waiter& w : TakeWaiters(
             [&](const Waiter& w) { return closing_ || w.deadline <= now; })) {
      replies.emplace_back(std::move(w.done), Answer(w.request));
    }
    if (replies.empty()) continue;
    lock.unlock();
    Reply(std::move(replies));
    lock.lock();
  }
  std::vector<std::pair<std::function<void(FollowChunk)>, FollowChunk>> replies;
  for (Waiter& w : TakeWaiters([](const Waiter&) { return true; })) {
    replies.emplace_back(std::move(w.done), Answer(w.request));
  }
  lock.unlock();
  Reply(std::move(replies));
}

}  // namespace spool::actors
